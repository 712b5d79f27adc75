package gateway

import "github.com/openai/openai-go/v3"

// toolCallIndexer gives every streamed tool call an index of its own before
// the stream is accumulated by index. Ollama streams each call at index 0
// with its own id; merged by index, two read_file calls would become one
// call named "read_fileread_file" with both argument texts run together.
// A new id is a new call; a delta without an id continues the call last
// started at its index.
type toolCallIndexer struct {
	byID    map[string]int64
	current map[[2]int64]int64 // (choice, wire index) → accumulator index
	next    map[int64]int64    // choice → next free accumulator index
}

func (x *toolCallIndexer) fix(chunk *openai.ChatCompletionChunk) {
	if x.byID == nil {
		x.byID, x.current, x.next = map[string]int64{}, map[[2]int64]int64{}, map[int64]int64{}
	}
	for i := range chunk.Choices {
		choice := chunk.Choices[i].Index
		calls := chunk.Choices[i].Delta.ToolCalls
		for j := range calls {
			c := &calls[j]
			key := [2]int64{choice, c.Index}
			if c.ID != "" {
				idx, seen := x.byID[c.ID]
				if !seen {
					idx = x.next[choice]
					x.next[choice]++
					x.byID[c.ID] = idx
				}
				x.current[key] = idx
			} else if _, ok := x.current[key]; !ok {
				x.current[key] = x.next[choice]
				x.next[choice]++
			}
			c.Index = x.current[key]
		}
	}
}
