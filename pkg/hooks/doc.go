// Package hooks is Herald's side of plugin hooks: events published on
// herald.hooks.* subjects and the request/reply hooks (pre_llm_call,
// pre_tool_call) a plugin answers as a plain NATS client, in any language.
//
// A hook never stalls a session: nobody listening costs one round trip to
// the server (no-responders), a slow plugin at most the configured timeout,
// and a reply that is not JSON or has the wrong shape counts as no reply
// (logged once per subject). The package owns the hook shapes and the
// fencing of plugin context; it must not decide what the services do with
// an answer beyond that.
package hooks
