package kafka

import (
	"errors"
	"fmt"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/codec"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
)

// decoder fills the record columns of a row from a record's value, in the
// source's format, with the files source's rules (engine/codec): a missing
// key, a JSON null and an empty CSV field are null; a value of the wrong
// type makes the record malformed; timestamps are RFC 3339 strings or epoch
// milliseconds.
type decoder struct {
	format v1.KafkaFormat
	cols   v1.Columns
	dec    *codec.Decoder
	avro   *avroDecoder       // format avro
	proto  *protoDecoder      // format protobuf
	json   *jsonSchemaDecoder // format jsonSchema
}

func newDecoder(format v1.KafkaFormat, cols v1.Columns) *decoder {
	return &decoder{format: format, cols: cols, dec: codec.NewDecoder(cols)}
}

// decode fills row[:len(d.cols)] from value, boxing the values from vals.
func (d *decoder) decode(value []byte, row []any, vals *box.Slab) error {
	switch d.format {
	case v1.KafkaRaw:
		if value != nil {
			row[0] = vals.Bytes(value)
		}
		return nil
	case v1.KafkaCSV:
		return d.csv(value, row)
	case v1.KafkaAvro:
		return d.avro.decode(value, row, vals)
	case v1.KafkaProtobuf:
		return d.proto.decode(value, row, vals)
	case v1.KafkaJSONSchema:
		return d.json.decode(value, row, vals)
	default:
		return d.dec.DecodeJSON(value, row, vals)
	}
}

// csv parses one CSV record: columns in schema order, no header, an empty
// field is null.
func (d *decoder) csv(value []byte, row []any) error {
	var bad error
	rows := d.dec.Decode(v1.FormatCSV, value, func(m codec.Malformed) { bad = errors.New(m.Reason) })
	switch {
	case bad != nil:
		return bad
	case len(rows) != 1:
		return fmt.Errorf("want one CSV record, got %d", len(rows))
	}
	copy(row, rows[0])
	return nil
}
