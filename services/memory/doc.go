// Package memory is Herald's durable memory service. It owns:
//   - the `memory` tool (add, replace, remove, read) on two stores per tenant,
//     `memory` (the agent's notes) and `user` (the user profile), kept in the
//     JetStream KV bucket bus.BucketMemory and updated with compare-and-set so
//     every memory instance agrees;
//   - the memory snapshot the loop freezes into a session's system prompt
//     (core request/reply on bus.MemorySnapshotSubject);
//   - the recalled-memory fence (<memory-context>) and the optional external
//     memory provider interface;
//   - `session_search`: a full-text index over every transcript on the
//     SESSIONS stream, kept up to date as transcripts grow and saved under the
//     data dir so a restart does not re-read the whole stream.
//
// It must not touch session state, transcripts (it only reads them), tool
// runners or model calls: it meets the rest of Herald only on the bus.
package memory
