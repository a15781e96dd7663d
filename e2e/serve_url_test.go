//go:build unix

package e2e

import (
	"bufio"
	"io"
	"regexp"
)

var servingRE = regexp.MustCompile(`on (http://[^ ]+/mcp)`)

// servedURL reads `hindsight serve`'s stderr and sends on the channel it
// returns the URL serve says it serves on; the channel is closed when
// stderr ends.
func servedURL(stderr io.Reader) <-chan string {
	url := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				url <- m[1]
			}
		}
		close(url)
	}()
	return url
}
