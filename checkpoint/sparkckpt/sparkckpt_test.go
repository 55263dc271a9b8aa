package sparkckpt_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pierrec/lz4/v4"

	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
)

// javaOut writes as java.io.DataOutputStream does.
type javaOut struct{ bytes.Buffer }

func (o *javaOut) writeInt(v int32) { _ = binary.Write(&o.Buffer, binary.BigEndian, v) }

// writeUTF writes modified UTF-8: NUL as C0 80, the rest as UTF-16 units of 1–3 bytes.
func (o *javaOut) writeUTF(s string) {
	var b []byte
	for _, u := range utf16Units(s) {
		switch {
		case u != 0 && u < 0x80:
			b = append(b, byte(u))
		case u < 0x800:
			b = append(b, 0xC0|byte(u>>6), 0x80|byte(u&0x3F))
		default:
			b = append(b, 0xE0|byte(u>>12), 0x80|byte(u>>6&0x3F), 0x80|byte(u&0x3F))
		}
	}
	_ = binary.Write(&o.Buffer, binary.BigEndian, uint16(len(b)))
	o.Write(b)
}

func (o *javaOut) writeChunked(s string, chunk int) {
	units := utf16Units(s)
	n := (len(units)-1)/chunk + 1
	o.writeInt(int32(n))
	for i := range n {
		o.writeUTF(fromUnits(units[i*chunk : min(len(units), (i+1)*chunk)]))
	}
}

const (
	keySchema   = `{"type":"struct","fields":[{"name":"window","type":{"type":"struct","fields":[{"name":"start","type":"timestamp","nullable":true},{"name":"end","type":"timestamp","nullable":true}]},"nullable":false},{"name":"country","type":"string","nullable":true}]}`
	valueSchema = `{"type":"struct","fields":[{"name":"count","type":"long","nullable":false},{"name":"note","type":"string","nullable":true}]}`
)

// writeCheckpoint lays out a checkpoint as Spark 4.2 writes one for a windowed count over a
// Kafka source and a file source (offsets v1), with Hadoop's checksum files beside.
func writeCheckpoint(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	put := func(key string, data []byte) {
		p := filepath.Join(dir, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	put("metadata", []byte(`{"id":"5b1f4d5e-6a4c-4f34-9d8c-0d1e2f3a4b5c"}`))
	meta := `{"batchWatermarkMs":%d,"batchTimestampMs":1767600000000,"conf":{"spark.sql.shuffle.partitions":"4","spark.sql.streaming.stateStore.providerClass":"org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider","spark.sql.streaming.aggregation.stateFormatVersion":"2"}}`
	for b, off := range []string{`{"orders":{"0":2,"1":0}}`, `{"orders":{"0":5,"1":1}}`, `{"orders":{"0":9,"1":4}}`} {
		files := `{"logOffset":` + string(rune('0'+b)) + `}`
		if b == 0 {
			files = "-"
		}
		put("offsets/"+string(rune('0'+b)), []byte("v1\n"+strings.Replace(meta, "%d", string(rune('0'+b))+"000", 1)+"\n"+off+"\n"+files))
		put("offsets/."+string(rune('0'+b))+".crc", []byte("crc"))
	}
	put("commits/0", []byte("v1\n{\"nextBatchWatermarkMs\":0}"))
	put("commits/1", []byte("v1\n{\"nextBatchWatermarkMs\":7000}"))
	put("sources/0/0", append([]byte{0}, []byte("v1\n{\"orders\":{\"0\":0,\"1\":0}}")...))
	put("sources/1/0", []byte("v1\n{\"path\":\"file:/in/a.json\",\"timestamp\":1,\"batchId\":0}\n{\"path\":\"file:/in/b.json\",\"timestamp\":2,\"batchId\":0}"))
	put("sources/1/1", []byte("v1\n{\"path\":\"file:/in/c.json\",\"timestamp\":3,\"batchId\":1}"))
	// A compaction of batches 0–1 beside the files it replaces, then batch 2.
	put("sources/1/1.compact", []byte("v1\n{\"path\":\"file:/in/a.json\",\"timestamp\":1,\"batchId\":0}\n{\"path\":\"file:/in/b.json\",\"timestamp\":2,\"batchId\":0}\n{\"path\":\"file:/in/c.json\",\"timestamp\":3,\"batchId\":1}"))
	put("sources/1/2", []byte("v1\n{\"path\":\"file:/in/d.json\",\"timestamp\":4,\"batchId\":2}"))
	put("state/0/_metadata/metadata", []byte(`v1
{"operatorInfo":{"operatorId":0,"operatorName":"stateStoreSave"},"stateStoreInfo":[{"storeName":"default","numColsPrefixKey":0,"numPartitions":4}]}`))
	var schema javaOut
	schema.writeUTF("v2")
	schema.writeChunked(keySchema, 40) // small chunks: the reader must join them
	schema.writeChunked(valueSchema, 65535)
	put("state/0/0/_metadata/schema", schema.Bytes())
	put("state/0/0/1.delta", []byte("LZ4Block…"))
	// A delta file as the HDFS-backed store writes one: a window's row put, another removed.
	var rows javaOut
	for i, start := range []int64{1767600000, 1767600060} {
		key := windowKey(start*1e6, (start+60)*1e6, "de")
		rows.writeInt(int32(len(key)))
		rows.Write(key)
		if i == 1 {
			rows.writeInt(-1) // a removal
			continue
		}
		rows.writeInt(16)
		rows.Write(make([]byte, 16))
	}
	rows.writeInt(-1)
	put("state/0/1/2.delta", lz4Blocks(t, rows.Bytes()))
	return dir
}

// windowKey is the UnsafeRow of a state key (window struct<start, end>, country string).
func windowKey(startMicros, endMicros int64, country string) []byte {
	le := binary.LittleEndian
	row := make([]byte, 8+2*8) // null bits, then a word per field
	nested := make([]byte, 8+2*8)
	le.PutUint64(nested[8:], uint64(startMicros))
	le.PutUint64(nested[16:], uint64(endMicros))
	le.PutUint64(row[8:], uint64(len(row))<<32|uint64(len(nested)))
	row = append(row, nested...)
	le.PutUint64(row[16:], uint64(len(row))<<32|uint64(len(country)))
	text := make([]byte, (len(country)+7)/8*8)
	copy(text, country)
	return append(row, text...)
}

// lz4Blocks writes data as lz4-java's LZ4BlockOutputStream does: an LZ4 block, a raw one,
// and the empty block that ends the stream.
func lz4Blocks(t *testing.T, data []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	block := func(method byte, payload []byte, olen int) {
		out.WriteString("LZ4Block")
		out.WriteByte(method)
		for _, v := range []int{len(payload), olen, 0} {
			_ = binary.Write(&out, binary.LittleEndian, int32(v))
		}
		out.Write(payload)
	}
	half := len(data) / 2
	buf := make([]byte, lz4.CompressBlockBound(half))
	n, err := lz4.CompressBlock(data[:half], buf, nil)
	if err != nil || n == 0 {
		t.Fatalf("compress: %d, %v", n, err)
	}
	block(0x20, buf[:n], half)
	block(0x10, data[half:], len(data)-half)
	block(0x10, nil, 0)
	return out.Bytes()
}

func TestReadSparkCheckpoint(t *testing.T) {
	dir := writeCheckpoint(t)
	store, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if ok, err := sparkckpt.IsSparkCheckpoint(ctx, store); !ok || err != nil {
		t.Fatalf("IsSparkCheckpoint = %v, %v; want true", ok, err)
	}
	c, err := sparkckpt.Read(ctx, store)
	if err != nil {
		t.Fatal(err)
	}
	if c.Metadata.ID != "5b1f4d5e-6a4c-4f34-9d8c-0d1e2f3a4b5c" || !slices.Equal(c.Planned, []int64{0, 1, 2}) || !slices.Equal(c.Committed, []int64{0, 1}) {
		t.Errorf("id %s, planned %v, committed %v", c.Metadata.ID, c.Planned, c.Committed)
	}
	if c.Latest.BatchID != 2 || c.Latest.WatermarkMs != 2000 || c.Latest.Conf["spark.sql.shuffle.partitions"] != "4" || c.LatestCommit.NextBatchWatermarkMs != 7000 {
		t.Errorf("latest %+v, commit %+v", c.Latest, c.LatestCommit)
	}
	if len(c.Sources) != 2 {
		t.Fatalf("sources = %+v", c.Sources)
	}
	if k := c.Sources[0]; k.ID != "0" || k.Kind != "kafka" || k.KafkaInitial["orders"]["1"] != 0 || string(k.Offset) != `{"orders":{"0":9,"1":4}}` {
		t.Errorf("kafka source = %+v", k)
	}
	if f := c.Sources[1]; f.ID != "1" || f.Kind != "files" || f.Files != 4 {
		t.Errorf("file source = %+v", f)
	}
	if len(c.Operators) != 1 {
		t.Fatalf("operators = %+v", c.Operators)
	}
	op := c.Operators[0]
	if op.Name != "stateStoreSave" || op.Stores[0].NumPartitions != 4 {
		t.Errorf("operator = %+v", op.OperatorMetadata)
	}
	s := op.Schemas["default"]
	if s.Version != 2 || len(s.Families) != 1 {
		t.Fatalf("schema = %+v", s)
	}
	key := s.Families[0].Key
	if got := key.Fields[0].TypeName() + " " + key.Fields[1].Name; got != "struct<start:timestamp,end:timestamp> country" {
		t.Errorf("key schema = %s", got)
	}
	if got := s.Families[0].Value.Names(); !slices.Equal(got, []string{"count", "note"}) {
		t.Errorf("value schema = %v", got)
	}
	// The windows of the state rows: the put's and the removal's, from the readable delta
	// file (partition 0's is not an LZ4 stream and is passed over).
	t0 := time.Unix(1767600000, 0).UTC()
	want := []sparkckpt.Window{{Start: t0, End: t0.Add(time.Minute)}, {Start: t0.Add(time.Minute), End: t0.Add(2 * time.Minute)}}
	if !slices.Equal(op.Windows, want) {
		t.Errorf("windows = %v, want %v", op.Windows, want)
	}
}

func TestOffsetsV2BySourceName(t *testing.T) {
	o, err := sparkckpt.ParseOffsets("offsets/3", 3, []byte("v2\n"+
		`{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{},"sourceMetadataInfo":{"orders":{"sourceId":"orders","providerName":"kafka","apiVersion":"v2"}}}`+
		"\norders:{\"t\":{\"0\":3}}\nclicks:{\"logOffset\":1}"))
	if err != nil {
		t.Fatal(err)
	}
	if len(o.Sources) != 2 || o.Sources[0].ID != "orders" || string(o.Sources[1].Offset) != `{"logOffset":1}` || o.SourceMetadata[0].ProviderName != "kafka" {
		t.Errorf("offsets = %+v", o)
	}
}

func TestStateSchemaV1AndV3(t *testing.T) {
	var v1 javaOut
	v1.writeUTF("v1")
	v1.writeUTF(keySchema)
	v1.writeUTF(valueSchema)
	s, err := sparkckpt.ParseStateSchema("schema", v1.Bytes())
	if err != nil || s.Version != 1 || s.Families[0].Key.Fields[1].Name != "country" {
		t.Fatalf("v1 = %+v, %v", s, err)
	}
	var v3 javaOut
	v3.writeUTF("v3")
	v3.writeInt(2)
	for _, name := range []string{"default", "count\u00e9\U0001F600"} { // non-ASCII names: modified UTF-8
		v3.writeUTF(name)
		v3.writeChunked(keySchema, 65535)
		v3.writeChunked(valueSchema, 65535)
		v3.writeChunked(`{"keyStateEncoderType":"NoPrefixKeyStateEncoderSpec"}`, 65535)
		v3.writeChunked(`{    }`, 65535)
	}
	s, err = sparkckpt.ParseStateSchema("schema", v3.Bytes())
	if err != nil || s.Version != 3 || len(s.Families) != 2 || s.Families[1].Name != "count\u00e9\U0001F600" {
		t.Fatalf("v3 = %+v, %v", s, err)
	}
}

func TestNewerVersionsAreRefused(t *testing.T) {
	var ue *sparkckpt.UnsupportedVersionError
	_, err := sparkckpt.ParseOffsets("offsets/0", 0, []byte("v3\n{}\n"))
	if !errors.As(err, &ue) || ue.Found != 3 || ue.Newest != 2 || !strings.Contains(err.Error(), "offsets/0 is version v3") {
		t.Errorf("offsets v3: %v", err)
	}
	_, err = sparkckpt.ParseCommit("commits/0", 0, []byte("v4\n{}"))
	if !errors.As(err, &ue) || ue.Found != 4 || ue.Newest != 3 {
		t.Errorf("commit v4: %v", err)
	}
	var v9 javaOut
	v9.writeUTF("v9")
	if _, err = sparkckpt.ParseStateSchema("state/0/0/_metadata/schema", v9.Bytes()); !errors.As(err, &ue) || ue.Found != 9 {
		t.Errorf("schema v9: %v", err)
	}
}

func utf16Units(s string) []uint16 {
	var out []uint16
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			out = append(out, uint16(0xD800+(r>>10)), uint16(0xDC00+(r&0x3FF)))
			continue
		}
		out = append(out, uint16(r))
	}
	return out
}

func fromUnits(u []uint16) string {
	var b strings.Builder
	for i := 0; i < len(u); i++ {
		r := rune(u[i])
		if r >= 0xD800 && r < 0xDC00 && i+1 < len(u) {
			r = 0x10000 + (r-0xD800)<<10 + (rune(u[i+1]) - 0xDC00)
			i++
		}
		b.WriteRune(r)
	}
	return b.String()
}

// readFiles writes files (key → content) into a folder and reads it as a Spark checkpoint.
func readFiles(t *testing.T, files map[string]string) *sparkckpt.Checkpoint {
	t.Helper()
	dir := t.TempDir()
	for key, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(key))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	store, err := checkpoint.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := sparkckpt.Read(t.Context(), store)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestNamedSourceWithOffsetsV1: Spark 4.2 lists a named source by position in offsets v1 but
// keeps its log under sources/<name> (seen in the spark runtime's checkpoints): with one
// source, its log is read there.
func TestNamedSourceWithOffsetsV1(t *testing.T) {
	c := readFiles(t, map[string]string{
		"metadata":              `{"id":"5b1f4d5e-6a4c-4f34-9d8c-0d1e2f3a4b5c"}`,
		"offsets/0":             "v1\n" + `{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{"spark.sql.streaming.queryEvolution.enableSourceEvolution":"true"}}` + "\n" + `{"logOffset":0}`,
		"commits/0":             "v1\n{\"nextBatchWatermarkMs\":0}",
		"sources/orders/0":      "v1\n{\"path\":\"file:/in/a.json\",\"timestamp\":1,\"batchId\":0}",
		"sources/orders/.0.crc": "crc",
	})
	if len(c.Sources) != 1 || c.Sources[0].Kind != "files" || c.Sources[0].Files != 1 || !slices.Equal(c.Sources[0].Folders, []string{"file:/in"}) {
		t.Errorf("sources = %+v, want the files source with its log from sources/orders", c.Sources)
	}
}

// TestFileSourceFoldersOnS3: the folders a files source read are named as Spark names them,
// s3a:// included (not s3a:/, which the planner would take for another folder than the
// spec's s3://), and LockstepLocation turns them back into the spec's.
func TestFileSourceFoldersOnS3(t *testing.T) {
	c := readFiles(t, map[string]string{
		"metadata":         `{"id":"5b1f4d5e-6a4c-4f34-9d8c-0d1e2f3a4b5c"}`,
		"offsets/0":        "v1\n" + `{"batchWatermarkMs":0,"batchTimestampMs":1,"conf":{"spark.sql.streaming.queryEvolution.enableSourceEvolution":"true"}}` + "\n" + `{"logOffset":0}`,
		"commits/0":        "v1\n{\"nextBatchWatermarkMs\":0}",
		"sources/orders/0": "v1\n{\"path\":\"s3a://b/landing/orders/1.json\",\"timestamp\":1,\"batchId\":0}",
	})
	if len(c.Sources) != 1 || !slices.Equal(c.Sources[0].Folders, []string{"s3a://b/landing/orders"}) {
		t.Fatalf("sources = %+v, want the folder s3a://b/landing/orders", c.Sources)
	}
	if got := sparkckpt.LockstepLocation(c.Sources[0].Folders[0]); got != "s3://b/landing/orders" {
		t.Errorf("LockstepLocation(%s) = %s, want s3://b/landing/orders", c.Sources[0].Folders[0], got)
	}
}
