module github.com/heraldrun/herald/services/herald

go 1.26.0

require (
	github.com/heraldrun/herald/pkg v0.0.0
	github.com/heraldrun/herald/proto v0.0.0
	github.com/heraldrun/herald/services/accounting v0.0.0
	github.com/heraldrun/herald/services/compressor v0.0.0
	github.com/heraldrun/herald/services/gateway v0.0.0
	github.com/heraldrun/herald/services/loop v0.0.0
	github.com/heraldrun/herald/services/memory v0.0.0
	github.com/heraldrun/herald/services/toolrunner v0.0.0
)

replace (
	github.com/heraldrun/herald/pkg => ../../pkg
	github.com/heraldrun/herald/proto => ../../proto
	github.com/heraldrun/herald/services/accounting => ../accounting
	github.com/heraldrun/herald/services/compressor => ../compressor
	github.com/heraldrun/herald/services/gateway => ../gateway
	github.com/heraldrun/herald/services/loop => ../loop
	github.com/heraldrun/herald/services/memory => ../memory
	github.com/heraldrun/herald/services/toolrunner => ../toolrunner
)
