module github.com/heraldrun/herald/services/loop

go 1.26.0

require (
	github.com/heraldrun/herald/pkg v0.0.0
	github.com/heraldrun/herald/proto v0.0.0
	github.com/nats-io/nats.go v1.55.0
	github.com/rs/zerolog v1.35.1
	google.golang.org/protobuf v1.36.12
)

require (
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/mattn/go-colorable v0.1.14 // indirect
	github.com/mattn/go-isatty v0.0.20 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace (
	github.com/heraldrun/herald/pkg => ../../pkg
	github.com/heraldrun/herald/proto => ../../proto
)
