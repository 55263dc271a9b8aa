package sparkckpt

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pierrec/lz4/v4"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// Window is the time window of one state row's key: [Start, End).
type Window struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
}

// maxWindowFiles and maxWindows bound how much of an operator's state the reader samples for
// its windows: a few files and rows tell a window's size and slide.
const (
	maxWindowFiles = 6
	maxWindows     = 200
)

// readWindows samples the windows of the state rows of an operator whose state key has a
// window (window: struct<start: timestamp, end: timestamp>), from its default store's delta
// and snapshot files (the HDFS-backed state store's format: an LZ4 stream of key and value
// UnsafeRows), newest versions first. keys are the state/ keys of the checkpoint. A file it
// cannot read (another codec) is passed over, and a store without such files (RocksDB's)
// gives no windows and no error: the window is then not inferred.
func readWindows(ctx context.Context, store checkpoint.Store, keys []string, id int64, key StructType) ([]Window, error) {
	field := slices.IndexFunc(key.Fields, func(f StructField) bool {
		return f.Name == "window" && strings.HasPrefix(f.TypeName(), "struct<start:timestamp,end:timestamp")
	})
	if field < 0 {
		return nil, nil
	}
	type file struct {
		key     string
		version int64
	}
	var files []file
	prefix := fmt.Sprintf("state/%d/", id)
	for _, k := range keys {
		rest, ok := strings.CutPrefix(k, prefix)
		if !ok || strings.Count(rest, "/") != 1 {
			continue // another operator, or a store other than the default one
		}
		base := path.Base(rest)
		v, ext, _ := strings.Cut(base, ".")
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || (ext != "delta" && ext != "snapshot") {
			continue
		}
		files = append(files, file{k, n})
	}
	slices.SortStableFunc(files, func(a, b file) int { return cmp.Compare(b.version, a.version) })
	var out []Window
	for i, f := range files {
		if i == maxWindowFiles || len(out) >= maxWindows {
			break
		}
		data, err := store.Get(ctx, f.key)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f.key, err)
		}
		rows, err := stateKeys(data)
		if err != nil {
			continue // not a file this reader knows
		}
		for _, r := range rows {
			if w, ok := rowWindow(r, len(key.Fields), field); ok && len(out) < maxWindows {
				out = append(out, w)
			}
		}
	}
	return out, nil
}

// lz4Magic opens each block of lz4-java's LZ4BlockOutputStream, Spark's lz4 codec.
var lz4Magic = []byte("LZ4Block")

// unLZ4Blocks decompresses an LZ4BlockOutputStream: blocks of the magic, a token (method in
// the high nibble: 1 raw, 2 LZ4), the compressed and the original length and a checksum
// (little-endian int32s), then the data; an empty block ends the stream.
func unLZ4Blocks(data []byte) ([]byte, error) {
	var out []byte
	for len(data) > 0 {
		if len(data) < 21 || !bytes.Equal(data[:8], lz4Magic) {
			return nil, errors.New("not an LZ4 block stream")
		}
		method := data[8] & 0xf0
		clen := int(binary.LittleEndian.Uint32(data[9:]))
		olen := int(binary.LittleEndian.Uint32(data[13:]))
		data = data[21:]
		if clen < 0 || clen > len(data) || olen < 0 {
			return nil, errors.New("truncated LZ4 block")
		}
		if olen == 0 {
			break
		}
		switch method {
		case 0x10:
			out = append(out, data[:clen]...)
		case 0x20:
			buf := make([]byte, olen)
			n, err := lz4.UncompressBlock(data[:clen], buf)
			if err != nil {
				return nil, fmt.Errorf("LZ4 block: %w", err)
			}
			out = append(out, buf[:n]...)
		default:
			return nil, fmt.Errorf("LZ4 block method %#x", method)
		}
		data = data[clen:]
	}
	return out, nil
}

// stateKeys reads the keys of a delta or snapshot file of the HDFS-backed state store: after
// decompression, records of a big-endian int key size, the key's UnsafeRow, an int value
// size (-1 for a removal) and the value's UnsafeRow; a key size of -1 ends the file.
func stateKeys(data []byte) ([][]byte, error) {
	raw, err := unLZ4Blocks(data)
	if err != nil {
		return nil, err
	}
	var keys [][]byte
	next := func() (int, bool) {
		if len(raw) < 4 {
			return 0, false
		}
		n := int(int32(binary.BigEndian.Uint32(raw)))
		raw = raw[4:]
		return n, true
	}
	for {
		n, ok := next()
		if !ok {
			return nil, errors.New("state file ends without its end mark")
		}
		if n < 0 {
			return keys, nil
		}
		if n > len(raw) {
			return nil, errors.New("truncated state key")
		}
		keys = append(keys, raw[:n])
		raw = raw[n:]
		if n, ok = next(); !ok {
			return nil, errors.New("truncated state value")
		}
		if n > 0 {
			if n > len(raw) {
				return nil, errors.New("truncated state value")
			}
			raw = raw[n:]
		}
	}
}

// rowWindow reads the window at field of an UnsafeRow of fields fields: a null bit set (a
// long per 64 fields), then a long per field; a struct field's long is its offset (high 32
// bits) and size in the row, where a nested UnsafeRow holds start and end as microseconds.
func rowWindow(row []byte, fields, field int) (Window, bool) {
	bitset := (fields + 63) / 64 * 8
	word := func(b []byte, i int) (uint64, bool) {
		if i < 0 || i+8 > len(b) {
			return 0, false
		}
		return binary.LittleEndian.Uint64(b[i:]), true
	}
	if null, ok := word(row, field/64*8); !ok || null&(1<<(field%64)) != 0 {
		return Window{}, false
	}
	v, ok := word(row, bitset+8*field)
	if !ok {
		return Window{}, false
	}
	off, size := int(v>>32), int(uint32(v))
	if off < 0 || size < 24 || off+size > len(row) {
		return Window{}, false
	}
	nested := row[off : off+size]
	if null, ok := word(nested, 0); !ok || null&3 != 0 {
		return Window{}, false
	}
	start, ok1 := word(nested, 8)
	end, ok2 := word(nested, 16)
	if !ok1 || !ok2 || int64(end) <= int64(start) {
		return Window{}, false
	}
	return Window{Start: time.UnixMicro(int64(start)).UTC(), End: time.UnixMicro(int64(end)).UTC()}, true
}
