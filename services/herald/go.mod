module github.com/heraldrun/herald/services/herald

go 1.26.0

require (
	github.com/ClickHouse/clickhouse-go/v2 v2.51.0
	github.com/creack/pty v1.1.24
	github.com/google/uuid v1.6.0
	github.com/heraldrun/herald/pkg v0.0.0
	github.com/heraldrun/herald/proto v0.0.0
	github.com/heraldrun/herald/services/accounting v0.0.0
	github.com/heraldrun/herald/services/api v0.0.0
	github.com/heraldrun/herald/services/compressor v0.0.0
	github.com/heraldrun/herald/services/gateway v0.0.0
	github.com/heraldrun/herald/services/loop v0.0.0
	github.com/heraldrun/herald/services/memory v0.0.0
	github.com/heraldrun/herald/services/toolrunner v0.0.0
	github.com/modelcontextprotocol/go-sdk v1.8.0
	github.com/nats-io/nats-server/v2 v2.15.2
	github.com/nats-io/nats.go v1.55.0
	github.com/openai/openai-go/v3 v3.99.0
	github.com/peterh/liner v1.2.3
	github.com/rs/zerolog v1.35.1
	github.com/stretchr/testify v1.12.1
	google.golang.org/protobuf v1.36.12
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/ClickHouse/ch-go v0.75.0 // indirect
	github.com/andybalholm/brotli v1.2.7 // indirect
	github.com/antithesishq/antithesis-sdk-go v0.8.0-default-no-op // indirect
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/clipperhouse/uax29/v2 v2.7.0 // indirect
	github.com/coder/websocket v1.8.15 // indirect
	github.com/go-faster/city v1.0.1 // indirect
	github.com/go-faster/errors v0.8.0 // indirect
	github.com/google/go-tpm v0.9.8 // indirect
	github.com/google/jsonschema-go v0.4.3 // indirect
	github.com/klauspost/compress v1.20.3 // indirect
	github.com/mattn/go-colorable v0.1.15 // indirect
	github.com/mattn/go-isatty v0.0.23 // indirect
	github.com/mattn/go-runewidth v0.0.31 // indirect
	github.com/minio/highwayhash v1.0.4 // indirect
	github.com/nats-io/jwt/v2 v2.8.2 // indirect
	github.com/nats-io/nkeys v0.4.16 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	github.com/paulmach/orb v0.14.0 // indirect
	github.com/pierrec/lz4/v4 v4.1.33 // indirect
	github.com/prometheus/prometheus v0.315.1
	github.com/segmentio/asm v1.2.1 // indirect
	github.com/segmentio/encoding v0.5.4 // indirect
	github.com/shopspring/decimal v1.6.0 // indirect
	github.com/tidwall/gjson v1.20.0 // indirect
	github.com/tidwall/match v1.1.1 // indirect
	github.com/tidwall/pretty v1.2.1 // indirect
	github.com/tidwall/sjson v1.2.5 // indirect
	github.com/yosida95/uritemplate/v3 v3.0.2 // indirect
	go.opentelemetry.io/otel v1.47.0 // indirect
	go.opentelemetry.io/otel/trace v1.47.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/crypto v0.58.0 // indirect
	golang.org/x/oauth2 v0.36.0 // indirect
	golang.org/x/sync v0.23.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/time v0.16.0 // indirect
	mvdan.cc/sh/v3 v3.14.1 // indirect
)

replace (
	github.com/heraldrun/herald/pkg => ../../pkg
	github.com/heraldrun/herald/proto => ../../proto
	github.com/heraldrun/herald/services/accounting => ../accounting
	github.com/heraldrun/herald/services/api => ../api
	github.com/heraldrun/herald/services/compressor => ../compressor
	github.com/heraldrun/herald/services/gateway => ../gateway
	github.com/heraldrun/herald/services/loop => ../loop
	github.com/heraldrun/herald/services/memory => ../memory
	github.com/heraldrun/herald/services/toolrunner => ../toolrunner
)
