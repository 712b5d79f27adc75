package redact

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const key = "sk-proj-abcdef0123456789xyzQRSTuvw-_9876"

func TestAnyRunOfTwelveCharactersOfAKeyIsRedacted(t *testing.T) {
	s := New(key, "")
	for name, echoed := range map[string]string{
		"whole":                  key,
		"without its prefix":     key[8:],
		"twenty from the middle": key[10:30],
		"exactly twelve":         key[5:17],
		"the tail":               key[len(key)-12:],
		"twice":                  key[3:20] + " and again " + key[20:],
	} {
		msg := `{"error":{"message":"Incorrect API key provided: ` + echoed + `. You can find your API key at https://platform.example/account"}}`
		got := s.String(msg)
		require.NotContains(t, got, echoed, name)
		for i := 0; i+MinRun <= len(key); i++ {
			require.NotContains(t, got, key[i:i+MinRun], "%s: a 12-character run of the key survived: %s", name, got)
		}
		require.Contains(t, got, "[redacted]", name)
		require.Contains(t, got, "You can find your API key at https://platform.example/account", name)
	}
}

func TestShortRunsAndOtherTextStay(t *testing.T) {
	s := New(key)
	msg := "model gpt-4o: " + key[2:13] + " is eleven characters of the key, not enough to tell"
	require.Equal(t, msg, s.String(msg))
	require.Equal(t, "", s.String(""))
	require.Equal(t, "abc", s.String("abc"))
	// The zero value and empty keys remove nothing.
	require.Equal(t, key, Secrets{}.String(key))
	require.True(t, New("", "").Empty())
	require.False(t, s.Empty())
}

func TestShortSecretsAreRedactedWhole(t *testing.T) {
	s := New("hunter2", key)
	require.Equal(t, "pw=[redacted] key=[redacted]!", s.String("pw=hunter2 key="+key+"!"))
	require.Equal(t, "hunter", s.String("hunter"))
}

func TestAdjacentRunsOfSeveralKeysBecomeOneMark(t *testing.T) {
	other := strings.Repeat("Z", 4) + "0987654321abcdefghij"
	s := New(key, other)
	got := s.Replace("a "+key[4:30]+other[2:]+" b", "#")
	require.Equal(t, "a # b", got)
}

func FuzzReplaceNeverLeavesARun(f *testing.F) {
	f.Add(key[6:25], "prefix ", " suffix")
	f.Fuzz(func(t *testing.T, inner, before, after string) {
		s := New(key)
		got := s.String(before + inner + after)
		for i := 0; i+MinRun <= len(key); i++ {
			if strings.Contains(got, key[i:i+MinRun]) {
				t.Fatalf("run %q survived in %q", key[i:i+MinRun], got)
			}
		}
	})
}
