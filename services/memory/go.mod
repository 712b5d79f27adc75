module github.com/heraldrun/herald/services/memory

go 1.26.0

require (
	github.com/heraldrun/herald/pkg v0.0.0
	github.com/heraldrun/herald/proto v0.0.0
)

replace (
	github.com/heraldrun/herald/pkg => ../../pkg
	github.com/heraldrun/herald/proto => ../../proto
)
