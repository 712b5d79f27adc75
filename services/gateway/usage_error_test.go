package gateway

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/heraldrun/herald/pkg/scripted"
	"github.com/stretchr/testify/require"
)

// A failed attempt's usage event carries what the provider said, so the
// dashboard can show more than its class; the key it echoes never travels.
func TestFailedAttemptUsageEventCarriesTheProvidersMessageRedacted(t *testing.T) {
	key := "sk-live-usage0123456789abcdef"
	// The provider echoes the key without its prefix and another key-shaped
	// string; neither may reach the usage stream.
	body := `{"error":{"message":"Invalid request: key ending usage0123456789abcdef cannot call model m1; also tried sk-proj-ZYXWVUTSRQPONMLK","type":"invalid_request_error"}}`
	r := newRig(t, scripted.Conversation(scripted.Reply{Status: 400, Body: body}),
		func(c *Config) { c.Primary.APIKey = key })
	resp := r.call(r.request("ue1", "hello"))
	require.Equal(t, string(ClassInvalidRequest), resp.GetErrorClass())

	usage := r.usageEvents()
	require.Len(t, usage, 1)
	u := usage[0]
	require.Equal(t, StatusError, u.GetStatus())
	require.Equal(t, string(ClassInvalidRequest), u.GetErrorClass())
	require.Contains(t, u.GetErrorMessage(), "HTTP 400: Invalid request: key ending")
	require.Contains(t, u.GetErrorMessage(), "cannot call model m1")
	for _, secret := range []string{key, "usage0123456789abcdef", "0123456789ab", "ZYXWVUTSRQPONMLK"} {
		require.NotContains(t, u.GetErrorMessage(), secret)
	}
	require.Equal(t, "Bearer "+key, r.model.Requests()[0].Header.Get("Authorization"), "the key is sent to the provider")
}

func TestEveryRetriedAttemptKeepsItsMessageAndSuccessHasNone(t *testing.T) {
	r := newRig(t, scripted.FailFirst(2, serverError, scripted.Conversation(scripted.Text("fine"))))
	resp := r.call(r.request("ue2", "hello"))
	require.Empty(t, resp.GetError())

	usage := r.usageEvents()
	require.Len(t, usage, 3)
	for _, u := range usage[:2] {
		require.Equal(t, string(ClassServerError), u.GetErrorClass())
		require.Equal(t, "HTTP 500: the server had an error", u.GetErrorMessage())
	}
	require.Equal(t, StatusOK, usage[2].GetStatus())
	require.Empty(t, usage[2].GetErrorMessage())
}

func TestUsageErrorMessageIsCutOnACharacterBoundary(t *testing.T) {
	long := strings.Repeat("é", 400) // 800 bytes
	ae := newAttemptError(ClassUnknown, long, nil)
	ae.status = 502
	msg := usageErrorMessage(ae, "")
	require.LessOrEqual(t, len(msg), maxUsageErrorMessage)
	require.Greater(t, len(msg), maxUsageErrorMessage-2)
	require.True(t, utf8.ValidString(msg), "a cut never splits a character")
	require.True(t, strings.HasPrefix(msg, "HTTP 502: éé"))

	ae = newAttemptError(ClassNetwork, "the connection to the provider failed: connection refused", nil)
	require.Equal(t, "the connection to the provider failed: connection refused", usageErrorMessage(ae, ""))
}
