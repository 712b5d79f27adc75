// Package deploytest checks the deployment files under deploy/ against the
// code: the NATS server configuration (deploy/nats/herald.conf) is loaded
// by a real server and every service runs under its own user, and the
// Dockerfile, compose file and Kubernetes manifests are parsed and matched
// with the service names, commands and environment variables Herald knows.
//
// It holds tests only; nothing imports it.
package deploytest
