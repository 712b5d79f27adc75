module github.com/heraldrun/herald/proto

go 1.26.0

require google.golang.org/protobuf v1.36.12
