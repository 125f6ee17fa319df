package shop_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// aofFile is the AOF file Redis appends to now (its last incr file) and
// its size.
func aofFile(b *testing.B, rdb *redis.Client) (path string, size int64) {
	ctx := context.Background()
	dir, err := rdb.ConfigGet(ctx, "dir").Result()
	if err != nil {
		b.Fatal(err)
	}
	sub, err := rdb.ConfigGet(ctx, "appenddirname").Result()
	if err != nil {
		b.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir["dir"], sub["appenddirname"], "*.incr.aof"))
	if len(files) == 0 {
		b.Fatalf("no AOF incr file in %s", filepath.Join(dir["dir"], sub["appenddirname"]))
	}
	// <appendfilename>.N.incr.aof: the newest has the largest N.
	seq := func(f string) int {
		n, _ := strconv.Atoi(filepath.Ext(strings.TrimSuffix(strings.TrimSuffix(f, ".aof"), ".incr"))[1:])
		return n
	}
	newest := slices.MaxFunc(files, func(x, y string) int { return seq(x) - seq(y) })
	fi, err := os.Stat(newest)
	if err != nil {
		b.Fatal(err)
	}
	return newest, fi.Size()
}

// keyShape is a key or command with its ids and numbers made one: what
// the AOF table groups by.
var keyShape = regexp.MustCompile(`[0-9a-fA-F-]{16,}|\d+`)

// aofTable reads what the AOF file at path gained from offset on and
// lists its bytes per purchase by command and key shape, most first.
func aofTable(b *testing.B, path string, offset int64, n float64) string {
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		b.Fatal(err)
	}
	r := bufio.NewReader(f)
	bytes, calls := map[string]int64{}, map[string]int64{}
	for {
		args, size, err := readRESP(r)
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatalf("read the AOF: %v", err)
		}
		what := strings.ToLower(args[0])
		if len(args) > 1 && what != "multi" && what != "exec" {
			what += " " + keyShape.ReplaceAllString(args[1], "#")
		}
		bytes[what] += size
		calls[what]++
	}
	keys := make([]string, 0, len(bytes))
	for k := range bytes {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y string) int { return int(bytes[y] - bytes[x]) })
	var sb strings.Builder
	fmt.Fprintf(&sb, "%-48s %8s %8s\n", "command key", "calls", "bytes")
	for _, k := range keys {
		fmt.Fprintf(&sb, "%-48s %8.3f %8.1f\n", k, float64(calls[k])/n, float64(bytes[k])/n)
	}
	return sb.String()
}

// readRESP reads one command of the AOF (a RESP array of bulk strings)
// and its size in bytes.
func readRESP(r *bufio.Reader) (args []string, size int64, err error) {
	head, err := r.ReadString('\n')
	if err != nil {
		return nil, 0, err
	}
	size = int64(len(head))
	if !strings.HasPrefix(head, "*") {
		return []string{strings.TrimSpace(head)}, size, nil // an annotation
	}
	count, err := strconv.Atoi(strings.TrimSpace(head[1:]))
	if err != nil {
		return nil, 0, err
	}
	for range count {
		l, err := r.ReadString('\n')
		if err != nil {
			return nil, 0, err
		}
		n, err := strconv.Atoi(strings.TrimSpace(l[1:]))
		if err != nil {
			return nil, 0, err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, 0, err
		}
		size += int64(len(l) + n + 2)
		args = append(args, string(buf[:n]))
	}
	return args, size, nil
}
