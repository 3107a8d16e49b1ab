// Package rawhttp reads HTTP/1.1 message heads byte for byte, for tests
// that check what a hop wrote on the wire (field order and case, which
// net/http's parser would normalise).
package rawhttp

import (
	"bufio"
	"strings"
)

// ReadHead reads one message head from br, through its empty line, and
// returns it as it was sent.
func ReadHead(br *bufio.Reader) (string, error) {
	var head strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return head.String(), err
		}
		head.WriteString(line)
		if line == "\r\n" {
			return head.String(), nil
		}
	}
}
