// Package e2e holds Herald's end-to-end tests: every service real, composed
// the way the herald binary composes them, over a real JetStream server, a
// real HTTP model server (pkg/scripted) and a real ClickHouse. Tests of the
// binary itself run bin/herald as a subprocess.
package e2e
