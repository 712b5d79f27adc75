package bus

// ClaimStoreFor exposes claimStoreFor to the package's external tests.
var ClaimStoreFor = claimStoreFor
