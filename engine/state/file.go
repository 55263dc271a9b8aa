package state

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/lockstep-dev/lockstep/checkpoint"
)

// File format of a .delta or .snapshot (all integers unsigned varints unless
// said otherwise):
//
//	"LKST" format(1 byte) kind('d'|'s') version partition rows count
//	count × record: op(1 byte: 1 put, 2 remove) keyLen key [valueLen value]
//	CRC-32C (Castagnoli) of everything before it, 4 bytes little-endian
//
// rows is the number of keys in the partition after the version: describe
// reads it without replaying. A snapshot holds only puts.
const (
	fileMagic   = "LKST"
	fileFormat  = 1
	opPut       = 1
	opRemove    = 2
	kindDelta   = 'd'
	kindSnap    = 's'
	trailerSize = 4
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt means a state file does not parse or fails its checksum.
var ErrCorrupt = errors.New("state file is corrupt")

// Record is one change in a state file: a put of Value under Key, or, when
// Remove is set, the removal of Key.
type Record struct {
	Key    string
	Value  []byte
	Remove bool
}

// FileHeader is what a state file says of itself.
type FileHeader struct {
	Kind      checkpoint.StateFileKind
	Version   int64
	Partition int
	// Rows is the number of keys in the partition after this version.
	Rows int64
	// Records is the number of records that follow.
	Records int
}

// fileWriter encodes a state file into one buffer.
type fileWriter struct {
	buf   []byte
	count int
	// countAt is where the record count goes; it is written last, as a
	// fixed-size varint.
	countAt int
}

// countWidth is the width of the record count: a padded uvarint, so the
// header can be written before the records are counted.
const countWidth = 5

func newFileWriter(kind checkpoint.StateFileKind, version int64, partition int, rows int64, sizeHint int) *fileWriter {
	w := &fileWriter{buf: make([]byte, 0, 32+sizeHint)}
	w.buf = append(w.buf, fileMagic...)
	w.buf = append(w.buf, fileFormat)
	if kind == checkpoint.StateSnapshot {
		w.buf = append(w.buf, kindSnap)
	} else {
		w.buf = append(w.buf, kindDelta)
	}
	w.buf = binary.AppendUvarint(w.buf, uint64(version))
	w.buf = binary.AppendUvarint(w.buf, uint64(partition))
	w.buf = binary.AppendUvarint(w.buf, uint64(rows))
	w.countAt = len(w.buf)
	w.buf = append(w.buf, make([]byte, countWidth)...)
	return w
}

func (w *fileWriter) put(key string, value []byte) {
	w.buf = append(w.buf, opPut)
	w.buf = binary.AppendUvarint(w.buf, uint64(len(key)))
	w.buf = append(w.buf, key...)
	w.buf = binary.AppendUvarint(w.buf, uint64(len(value)))
	w.buf = append(w.buf, value...)
	w.count++
}

func (w *fileWriter) remove(key string) {
	w.buf = append(w.buf, opRemove)
	w.buf = binary.AppendUvarint(w.buf, uint64(len(key)))
	w.buf = append(w.buf, key...)
	w.count++
}

func (w *fileWriter) finish() []byte {
	c := uint64(w.count)
	for i := range countWidth { // padded uvarint: continuation bit on all but the last byte
		b := byte(c & 0x7f)
		c >>= 7
		if i < countWidth-1 {
			b |= 0x80
		}
		w.buf[w.countAt+i] = b
	}
	return binary.LittleEndian.AppendUint32(w.buf, crc32.Checksum(w.buf, crcTable))
}

// EncodeFile encodes a state file with the given records, for tests and
// tools; the Store writes its files itself.
func EncodeFile(h FileHeader, records []Record) []byte {
	w := newFileWriter(h.Kind, h.Version, h.Partition, h.Rows, 0)
	for _, r := range records {
		if r.Remove {
			w.remove(r.Key)
		} else {
			w.put(r.Key, r.Value)
		}
	}
	return w.finish()
}

// DecodeFile checks a state file's checksum and calls each for every record
// in order. Keys are fresh strings; values alias data. It returns the header.
func DecodeFile(data []byte, each func(Record)) (FileHeader, error) {
	h, body, err := decodeHeader(data)
	if err != nil {
		return h, err
	}
	if len(data) < trailerSize || crc32.Checksum(data[:len(data)-trailerSize], crcTable) != binary.LittleEndian.Uint32(data[len(data)-trailerSize:]) {
		return h, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	body = body[:len(body)-trailerSize]
	for i := 0; i < h.Records; i++ {
		if len(body) == 0 {
			return h, fmt.Errorf("%w: %d of %d records", ErrCorrupt, i, h.Records)
		}
		op := body[0]
		body = body[1:]
		var key, val []byte
		if key, body, err = lenPrefixed(body); err != nil {
			return h, err
		}
		switch op {
		case opPut:
			if val, body, err = lenPrefixed(body); err != nil {
				return h, err
			}
			each(Record{Key: string(key), Value: val})
		case opRemove:
			each(Record{Key: string(key), Remove: true})
		default:
			return h, fmt.Errorf("%w: record op %d", ErrCorrupt, op)
		}
	}
	if len(body) != 0 {
		return h, fmt.Errorf("%w: %d bytes after the records", ErrCorrupt, len(body))
	}
	return h, nil
}

// DecodeHeader returns a state file's header without reading its records
// or checking its checksum.
func DecodeHeader(data []byte) (FileHeader, error) {
	h, _, err := decodeHeader(data)
	return h, err
}

func decodeHeader(data []byte) (FileHeader, []byte, error) {
	var h FileHeader
	if len(data) < len(fileMagic)+2 || string(data[:len(fileMagic)]) != fileMagic {
		return h, nil, fmt.Errorf("%w: not a state file", ErrCorrupt)
	}
	if data[4] != fileFormat {
		return h, nil, fmt.Errorf("%w: format %d, want %d", ErrCorrupt, data[4], fileFormat)
	}
	switch data[5] {
	case kindDelta:
		h.Kind = checkpoint.StateDelta
	case kindSnap:
		h.Kind = checkpoint.StateSnapshot
	default:
		return h, nil, fmt.Errorf("%w: kind %q", ErrCorrupt, data[5])
	}
	rest := data[6:]
	var vals [4]uint64
	for i := range vals {
		v, n := binary.Uvarint(rest)
		if n <= 0 {
			return h, nil, fmt.Errorf("%w: truncated header", ErrCorrupt)
		}
		vals[i], rest = v, rest[n:]
	}
	h.Version, h.Partition, h.Rows, h.Records = int64(vals[0]), int(vals[1]), int64(vals[2]), int(vals[3])
	return h, rest, nil
}

func lenPrefixed(b []byte) (val, rest []byte, err error) {
	n, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < n {
		return nil, nil, fmt.Errorf("%w: truncated record", ErrCorrupt)
	}
	return b[w : w+int(n)], b[w+int(n):], nil
}
