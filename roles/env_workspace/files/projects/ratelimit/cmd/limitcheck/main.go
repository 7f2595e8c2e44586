// Command limitcheck replays a request log through a per-client token bucket and prints each decision.
//
// Input, one request per line: "<unix-millis> <client>". Output: "<unix-millis> <client> allow|deny".
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"opsbench.local/ratelimit"
)

func main() {
	rate := flag.Float64("rate", 5, "tokens per second per client")
	burst := flag.Int("burst", 10, "bucket size per client")
	flag.Parse()
	denied, err := replay(os.Stdin, os.Stdout, *rate, *burst)
	if err != nil {
		fmt.Fprintln(os.Stderr, "limitcheck:", err)
		os.Exit(2)
	}
	fmt.Fprintf(os.Stderr, "denied %d request(s)\n", denied)
}

func replay(in io.Reader, out io.Writer, rate float64, burst int) (int, error) {
	if _, err := ratelimit.NewTokenBucket(ratelimit.SystemClock{}, rate, burst); err != nil {
		return 0, err
	}
	clock := ratelimit.NewManualClock(time.UnixMilli(0))
	reg := ratelimit.NewRegistry(clock, time.Hour, func() ratelimit.Limiter {
		b, _ := ratelimit.NewTokenBucket(clock, rate, burst)
		return b
	})
	denied := 0
	scanner := bufio.NewScanner(in)
	for line := 1; scanner.Scan(); line++ {
		fields := strings.Fields(scanner.Text())
		if len(fields) == 0 {
			continue
		}
		if len(fields) != 2 {
			return denied, fmt.Errorf("line %d: want \"<unix-millis> <client>\"", line)
		}
		ms, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return denied, fmt.Errorf("line %d: %v", line, err)
		}
		clock.Set(time.UnixMilli(ms))
		verdict := "allow"
		if !reg.Allow(fields[1]) {
			verdict = "deny"
			denied++
		}
		fmt.Fprintf(out, "%d %s %s\n", ms, fields[1], verdict)
	}
	return denied, scanner.Err()
}
