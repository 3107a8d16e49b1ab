// Package httprule is the one rulebook of HTTP/1.1 forwarding: every HTTP
// path of the product (the h1 relay at the edge and the agent, httpfwd's
// pinned forwarding and the net/http handlers behind them) decides here,
// and nowhere else:
//
//   - which fields apply to one connection only and are never passed on
//     (hop-by-hop), and which carry a message's framing and are written by
//     each hop from the framing it applies (Hop, Framing);
//   - what a Connection option may name: naming a framing field or Host
//     makes a message one that no hop may re-frame (ConnectionOption);
//   - which forwarding and identity fields the edge writes itself and never
//     takes from a client, on any path (Forwarded, Identity, EdgeWritten);
//   - which trailer fields are passed on (TrailerAllowed);
//   - when a request may be sent again and when a connection may carry the
//     next one (Replay over the Written count, Reusable, Quiet, Lease).
//
// The rules are plain functions over field names and facts the engines
// know, so each has a table test, and an engine that disagrees with
// another cannot do so by holding a copy of its own.
package httprule
