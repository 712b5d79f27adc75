package embedded

import (
	"net"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/stretchr/testify/require"
)

// A server whose port is taken fails as soon as it reports the bind error,
// not after the wait for readiness.
func TestStartFailsAtOnceOnATakenPort(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer taken.Close()
	start := time.Now()
	_, err = Start(Options{StoreDir: t.TempDir(), Listen: taken.Addr().String(), Log: zerolog.Nop()})
	require.ErrorIs(t, err, ErrListen)
	require.Contains(t, err.Error(), taken.Addr().String())
	require.Less(t, time.Since(start), readyWait/2)
}

func TestStartListensAndShutsDownTwice(t *testing.T) {
	s, err := Start(Options{StoreDir: t.TempDir(), Listen: "127.0.0.1:0", Log: zerolog.Nop()})
	require.NoError(t, err)
	require.NotEmpty(t, s.ClientURL())
	s.Shutdown()
	s.Shutdown()
}
