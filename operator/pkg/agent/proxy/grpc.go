package proxy

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// isGRPC reports whether r is a gRPC call.
func isGRPC(r *http.Request) bool {
	return strings.HasPrefix(r.Header.Get("Content-Type"), "application/grpc")
}

// grpcDeadline bounds a gRPC call by the deadline its client sent
// (grpc-timeout), counted from when it reached the agent: when it passes,
// the upstream stream is reset, and a call that got no answer yet ends
// with DEADLINE_EXCEEDED (grpcFail) rather than with whatever the
// upstream's own reset of the expired stream would turn into.
func grpcDeadline(r *http.Request) (*http.Request, context.CancelFunc) {
	if !isGRPC(r) {
		return r, func() {}
	}
	d, ok := parseGRPCTimeout(r.Header.Get("Grpc-Timeout"))
	if !ok {
		return r, func() {}
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	return r.WithContext(ctx), cancel
}

// parseGRPCTimeout reads a grpc-timeout value: at most 8 digits and a
// unit (H, M, S, m, u, n), as the gRPC over HTTP/2 protocol defines it.
func parseGRPCTimeout(v string) (time.Duration, bool) {
	if len(v) < 2 || len(v) > 9 {
		return 0, false
	}
	n, err := strconv.ParseInt(v[:len(v)-1], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	units := map[byte]time.Duration{'H': time.Hour, 'M': time.Minute, 'S': time.Second, 'm': time.Millisecond, 'u': time.Microsecond, 'n': time.Nanosecond}
	unit, ok := units[v[len(v)-1]]
	if !ok {
		return 0, false
	}
	return time.Duration(n) * unit, true
}

// gRPC status codes the agent answers with itself.
const (
	grpcDeadlineExceeded = "4"
	grpcUnavailable      = "14"
)

// grpcFail answers a gRPC call that got no answer from the upstream the
// way gRPC clients read errors: status 200 and the code and message in
// the trailers (X-Tuna-Error in the headers as for any failure).
// DEADLINE_EXCEEDED when the call's deadline passed, UNAVAILABLE
// otherwise, as gRPC maps a 502. A plain 502 would reach the client as
// UNAVAILABLE with the text lost ("unexpected content-type text/plain"),
// and a call whose deadline passed as UNAVAILABLE too.
func grpcFail(w http.ResponseWriter, r *http.Request, code, msg string) {
	status := grpcUnavailable
	if deadlinePassed(r.Context()) {
		status = grpcDeadlineExceeded
	}
	w.Header().Set("Content-Type", "application/grpc")
	w.Header().Set("X-Tuna-Error", code)
	w.WriteHeader(http.StatusOK)
	// HTTP/1.1 carries trailers only in a chunked body, which a flush
	// of the head before any body makes it.
	_ = http.NewResponseController(w).Flush()
	w.Header().Set(http.TrailerPrefix+"Grpc-Status", status)
	w.Header().Set(http.TrailerPrefix+"Grpc-Message", grpcPercentEncode(strings.TrimSpace(msg)))
}

// deadlinePassed says whether ctx's deadline has passed, by its error or
// by the clock: the upstream resets a stream when its own copy of the
// deadline passes, which it started later than the agent's, and that
// reset can be handled before the agent's timer has run.
func deadlinePassed(ctx context.Context) bool {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return true
	}
	dl, ok := ctx.Deadline()
	return ok && !time.Now().Before(dl)
}

// grpcPercentEncode encodes a grpc-message: bytes outside printable
// ASCII, and '%', as %XX.
func grpcPercentEncode(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= ' ' && c <= '~' && c != '%' {
			b.WriteByte(c)
			continue
		}
		b.WriteString("%" + strings.ToUpper(strconv.FormatInt(int64(c)|0x100, 16)[1:]))
	}
	return b.String()
}

// grpcStatusToTrailers turns a gRPC "trailers-only" response (the status
// and the trailer metadata in the headers of a response without body, as
// servers answer an error) into headers and trailers. The trailers-only
// form survives only if no hop sends the headers before the end, and
// reverse proxies that stream (FlushInterval -1, here and on the edge)
// may flush them at once: the client would then see headers, an end
// without trailers, and no status. A status in the trailers is valid
// gRPC whatever the hops do. Every field but the framing ones moves: a
// gRPC client reads the fields of a trailers-only response as trailer
// metadata, so they stay what the server meant them to be.
func grpcStatusToTrailers(res *http.Response) {
	if len(res.Trailer) > 0 || res.Header.Get("Grpc-Status") == "" || !strings.HasPrefix(res.Header.Get("Content-Type"), "application/grpc") {
		return
	}
	res.Trailer = http.Header{}
	for k, v := range res.Header {
		if k != "Content-Type" && k != "Content-Length" {
			res.Trailer[k] = v
			delete(res.Header, k)
		}
	}
}
