package app

import (
	"testing"

	"github.com/heraldrun/herald/pkg/config"
	"github.com/nats-io/nats.go"
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

// Replies go under the URL user's own prefix, which herald.conf lets only
// that user subscribe to; a configured prefix wins; no user keeps _INBOX.
func TestInboxPrefixFollowsTheNATSUser(t *testing.T) {
	prefix := func(cfg config.Config) string {
		o := nats.GetDefaultOptions()
		require.NoError(t, InboxOption(cfg)(&o))
		return o.InboxPrefix
	}
	require.Equal(t, "_INBOX_loop", prefix(config.Config{NATSURL: "nats://loop:pw@nats:4222,nats://loop:pw@n2:4222"}))
	require.Equal(t, "_INBOX", prefix(config.Config{NATSURL: "nats://127.0.0.1:4222"}))
	require.Equal(t, "_R_mine", prefix(config.Config{NATSURL: "nats://loop:pw@nats:4222", NATSInboxPrefix: "_R_mine"}))
	require.Equal(t, "_INBOX", prefix(config.Config{NATSURL: "nats://a.b:pw@nats:4222"}), "a user that is no subject token")
}
