package gateway

import (
	"encoding/json"

	"github.com/heraldrun/herald/proto/heraldpb"
)

// spliced is the body e.whole(call) gives, byte for byte, built from kept
// encodings (wirecache.go). The Messages API merges consecutive messages of
// one role into one turn and marks the last block of each of the last
// cachedTail turns; a turn before those is its blocks, each message's
// encoded once and kept, spliced into the turn's frame, and the turns are
// spliced into the body's frame. The marked turns are encoded each time.
func (e *anthropicEncoder) spliced(call modelCall) (*requestBody, error) {
	call.thinkBack = e.profile.anthropicThinks(call.model)
	var system []*heraldpb.ChatMessage
	var turns [][]int // indexes into call.messages, one list per turn
	var roles []string
	for i, m := range call.messages {
		if m.GetRole() == "system" {
			system = append(system, m)
			continue
		}
		role, _ := anthropicTurn(m, call.thinkBack)
		if n := len(roles); n > 0 && roles[n-1] == role {
			turns[n-1] = append(turns[n-1], i)
			continue
		}
		turns, roles = append(turns, []int{i}), append(roles, role)
	}
	if len(turns) == 0 {
		return e.whole(call) // no messages: the body says null, not []
	}
	head := call
	head.messages = system
	r := anthropicBody(head)
	e.limits(&r, call)
	r.Messages = []anthropicMessage{anthropicSentinelMessage}
	frame, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	marked := max(len(turns)-cachedTail, 0)
	parts := make([][]byte, len(turns))
	for t, idx := range turns {
		if parts[t], err = e.turn(call, roles[t], idx, t >= marked); err != nil {
			return nil, err
		}
	}
	if body, ok := spliceBody(frame, anthropicSentinelMessageJSON, parts); ok {
		return body, nil
	}
	return e.whole(call) // the sentinel is not there once
}

// turn encodes one turn of the messages at idx; a marked one is encoded
// whole with the cache marker on its last block.
func (e *anthropicEncoder) turn(call modelCall, role string, idx []int, marked bool) ([]byte, error) {
	if marked {
		var blocks []anthropicBlock
		for _, i := range idx {
			_, b := anthropicTurn(call.messages[i], call.thinkBack)
			blocks = append(blocks, b...)
		}
		blocks[len(blocks)-1].CacheControl = &cacheControl{Type: "ephemeral"}
		return json.Marshal(anthropicMessage{Role: role, Content: blocks})
	}
	frame, err := json.Marshal(anthropicMessage{Role: role, Content: []anthropicBlock{anthropicSentinelBlock}})
	if err != nil {
		return nil, err
	}
	parts := make([][]byte, len(idx))
	for j, i := range idx {
		if parts[j], err = e.blocks(call, i); err != nil {
			return nil, err
		}
	}
	body, ok := splice(frame, anthropicSentinelBlockJSON, parts)
	if !ok {
		blocks := []anthropicBlock{}
		for _, i := range idx {
			_, b := anthropicTurn(call.messages[i], call.thinkBack)
			blocks = append(blocks, b...)
		}
		return json.Marshal(anthropicMessage{Role: role, Content: blocks})
	}
	return body, nil
}

// blocks is the encoding of call.messages[i]'s content blocks joined by
// commas, kept in its wire slot when it has one.
func (e *anthropicEncoder) blocks(call modelCall, i int) ([]byte, error) {
	// a message's encoding is kept for the thinking model it goes to
	keep := i < len(call.wire) && (call.thinkBack || !hasThinking(call.messages[i]))
	if keep {
		if b, ok := call.wire[i].get(e); ok {
			return b, nil
		}
	}
	_, blocks := anthropicTurn(call.messages[i], call.thinkBack)
	var out []byte
	for j, block := range blocks {
		b, err := json.Marshal(block)
		if err != nil {
			return nil, err
		}
		if j > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	if keep {
		call.wire[i].put(e, out)
	}
	return out, nil
}

var (
	anthropicSentinelBlock       = anthropicBlock{Type: "text", Text: spliceSentinel}
	anthropicSentinelBlockJSON   = mustJSON(anthropicSentinelBlock)
	anthropicSentinelMessage     = anthropicMessage{Role: "user", Content: []anthropicBlock{anthropicSentinelBlock}}
	anthropicSentinelMessageJSON = mustJSON(anthropicSentinelMessage)
)
