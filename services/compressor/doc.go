// Package compressor is Herald's context-compression service. It owns how a
// history that no longer fits the model's window is shrunk:
//
//  1. pruning (free): tool outputs older than the protected tail become
//     one-line summaries;
//  2. head/tail protection: the system prompt, the first turns and the last
//     messages are kept verbatim, never splitting a tool call from its results;
//  3. the middle becomes one structured, reference-only summary written by the
//     model through the gateway (purpose "compression", so it is billed), or
//     deterministically when that call fails.
//
// It consumes COMPRESS and answers on the request's reply subject. It must not
// decide when to compress, track anti-thrash or lineage (the loop's), call a
// provider directly (the gateway's) or touch session state.
package compressor
