package gateway

import (
	"crypto/sha256"

	"github.com/heraldrun/herald/proto/heraldpb"
	"google.golang.org/protobuf/proto"
)

// toolIDsFor is msgs with every tool-call id in the form the provider
// accepts. The mapping depends on the id alone, so a call and its result
// still match, and ids the provider made itself pass unchanged.
func (p Profile) toolIDsFor(msgs []*heraldpb.ChatMessage) []*heraldpb.ChatMessage {
	if p.ToolCallIDs != IDsAlnum9 {
		return msgs
	}
	out := make([]*heraldpb.ChatMessage, len(msgs))
	for i, m := range msgs {
		if len(m.GetToolCalls()) == 0 && m.GetToolCallId() == "" {
			out[i] = m
			continue
		}
		c := proto.Clone(m).(*heraldpb.ChatMessage)
		for _, tc := range c.ToolCalls {
			tc.Id = alnum9(tc.GetId())
		}
		if c.ToolCallId != "" {
			c.ToolCallId = alnum9(c.ToolCallId)
		}
		out[i] = c
	}
	return out
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// alnum9 is id itself when it already is nine letters and digits, else
// nine letters and digits derived from its hash.
func alnum9(id string) string {
	if len(id) == 9 && isAlnum(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	b := make([]byte, 9)
	for i := range b {
		b[i] = alnum[int(sum[i])%len(alnum)]
	}
	return string(b)
}

func isAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
