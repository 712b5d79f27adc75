package app

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestRedactURLHidesPasswords(t *testing.T) {
	require.Equal(t, "nats://loop:xxxxx@nats:4222", RedactURL("nats://loop:s3cret@nats:4222"))
	require.Equal(t, "nats://a:xxxxx@n1:4222,nats://a:xxxxx@n2:4222", RedactURL("nats://a:p1@n1:4222,nats://a:p1@n2:4222"))
	require.Equal(t, "nats://127.0.0.1:4222", RedactURL("nats://127.0.0.1:4222"))
	require.NotContains(t, RedactURL("nats://u:hunter2@h:1"), "hunter2")
}

func TestCredentialsComeFromTheURL(t *testing.T) {
	require.Len(t, credentials("nats://admin:pw@127.0.0.1:4222"), 1)
	require.Empty(t, credentials("nats://127.0.0.1:4222"))
}
