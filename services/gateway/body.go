package gateway

import (
	"context"
	"io"
	"net/http"
)

// requestBody is an encoded request body kept as the parts it was spliced
// from (the frame's two ends, each message's kept encoding, the commas
// between) and read part after part, never joined: a large history is
// not copied into a new buffer on every step. At a 1 MB history that copy,
// into a fresh megabyte each time, was 7 % of a `herald up` process's CPU.
type requestBody struct {
	parts [][]byte
	size  int
	// read position: the part, and the offset in it
	part, off int
}

// bodyOf is a body of one part.
func bodyOf(b []byte) *requestBody { return &requestBody{parts: [][]byte{b}, size: len(b)} }

// Len is the body's length in bytes.
func (b *requestBody) Len() int { return b.size }

// Bytes is the whole body in one slice (a part's own bytes when there is
// one part).
func (b *requestBody) Bytes() []byte {
	if len(b.parts) == 1 {
		return b.parts[0]
	}
	out := make([]byte, 0, b.size)
	for _, p := range b.parts {
		out = append(out, p...)
	}
	return out
}

func (b *requestBody) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) && b.part < len(b.parts) {
		c := copy(p[n:], b.parts[b.part][b.off:])
		n += c
		if b.off += c; b.off == len(b.parts[b.part]) {
			b.part, b.off = b.part+1, 0
		}
	}
	if n == 0 && b.part >= len(b.parts) {
		return 0, io.EOF
	}
	return n, nil
}

// WriteTo writes what is left, a part at a time.
func (b *requestBody) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for ; b.part < len(b.parts); b.part, b.off = b.part+1, 0 {
		c, err := w.Write(b.parts[b.part][b.off:])
		n += int64(c)
		if err != nil {
			b.off += c
			return n, err
		}
	}
	return n, nil
}

func (b *requestBody) Close() error { return nil }

// reopen reads the same parts again from their start.
func (b *requestBody) reopen() (io.ReadCloser, error) {
	return &requestBody{parts: b.parts, size: b.size}, nil
}

// attach makes b req's body, with its length and a way to read it again,
// as net/http does itself for a []byte body.
func (b *requestBody) attach(req *http.Request) {
	req.Body, _ = b.reopen()
	req.ContentLength, req.GetBody = int64(b.size), b.reopen
}

type bodyKey struct{}

// withBody carries b to the SDK middleware (sdkOptions), which attaches it
// to the outgoing request: openai-go sends an io.Reader body without a
// length (chunked), and a request's body cannot be given one from outside.
func withBody(ctx context.Context, b *requestBody) context.Context {
	return context.WithValue(ctx, bodyKey{}, b)
}

// attachBody gives req the body withBody carried in its context, if any.
func attachBody(req *http.Request) {
	if b, ok := req.Context().Value(bodyKey{}).(*requestBody); ok {
		b.attach(req)
	}
}
