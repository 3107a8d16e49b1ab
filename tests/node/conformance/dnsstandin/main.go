// Command dnsstandin stands in for the coredns image that the Gateway API
// conformance suite's base manifests run (registry.k8s.io/coredns/coredns,
// for its UDPRoute tests): that image cannot be pulled here and coredns is
// not built from source, yet the suite waits for every pod of its
// namespaces to be Ready before any test. It answers every DNS query on
// UDP :53 with REFUSED. Tuna serves no UDPRoute, so no test the suite runs
// against tuna reads its answers (docs/gateway-api.md, Conformance).
package main

import (
	"log"
	"net"
)

func main() {
	conn, err := net.ListenPacket("udp", ":53")
	if err != nil {
		log.Fatal(err)
	}
	buf := make([]byte, 512)
	for {
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			log.Fatal(err)
		}
		if n < 12 {
			continue
		}
		reply := append([]byte(nil), buf[:n]...)
		reply[2] |= 0x80                // QR: a response, same id, opcode and question
		reply[3] = reply[3]&0xf0 | 0x05 // RCODE REFUSED, RA off
		if _, err := conn.WriteTo(reply, from); err != nil {
			log.Print(err)
		}
	}
}
