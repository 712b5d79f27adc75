// Package proto holds Herald's wire contracts. Internal messages are protobuf
// (herald/v1/herald.proto is the source of truth; heraldpb is generated from it
// with `make proto`). Public subjects speak JSON; their shapes are defined here
// and are part of the public contract in DESIGN.md: extend them, never change them.
package proto
