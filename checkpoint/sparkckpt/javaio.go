package sparkckpt

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf16"
)

// dataInput reads what java.io.DataOutputStream wrote: big-endian ints and writeUTF strings.
type dataInput struct {
	b   []byte
	off int
}

var errShort = errors.New("unexpected end of file")

func (in *dataInput) readInt() (int32, error) {
	if len(in.b)-in.off < 4 {
		return 0, errShort
	}
	v := int32(binary.BigEndian.Uint32(in.b[in.off:]))
	in.off += 4
	return v, nil
}

// readUTF reads a string written by DataOutputStream.writeUTF: a 2-byte length, then that
// many bytes of modified UTF-8 (NUL as C0 80, characters beyond the BMP as two 3-byte
// surrogates).
func (in *dataInput) readUTF() (string, error) {
	if len(in.b)-in.off < 2 {
		return "", errShort
	}
	n := int(binary.BigEndian.Uint16(in.b[in.off:]))
	in.off += 2
	if len(in.b)-in.off < n {
		return "", errShort
	}
	s, err := decodeModifiedUTF8(in.b[in.off : in.off+n])
	in.off += n
	return s, err
}

// readChunkedUTF reads a string that Spark's schema writers split into writeUTF chunks: an
// int count, then the chunks.
func (in *dataInput) readChunkedUTF() (string, error) {
	n, err := in.readInt()
	if err != nil {
		return "", err
	}
	if n < 0 || int(n) > len(in.b) {
		return "", fmt.Errorf("implausible chunk count %d", n)
	}
	var out []byte
	for range n {
		s, err := in.readUTF()
		if err != nil {
			return "", err
		}
		out = append(out, s...)
	}
	return string(out), nil
}

func decodeModifiedUTF8(b []byte) (string, error) {
	units := make([]uint16, 0, len(b))
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c < 0x80:
			units = append(units, uint16(c))
			i++
		case c&0xE0 == 0xC0 && i+1 < len(b):
			units = append(units, uint16(c&0x1F)<<6|uint16(b[i+1]&0x3F))
			i += 2
		case c&0xF0 == 0xE0 && i+2 < len(b):
			units = append(units, uint16(c&0x0F)<<12|uint16(b[i+1]&0x3F)<<6|uint16(b[i+2]&0x3F))
			i += 3
		default:
			return "", fmt.Errorf("malformed modified UTF-8 at byte %d", i)
		}
	}
	return string(utf16.Decode(units)), nil
}
