package kafka

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/engine/internal/box"
)

// registryTimeout bounds one request to the Schema Registry.
const registryTimeout = 30 * time.Second

// newRegistryClient returns a client of the Schema Registry spec names, with the basic-auth
// credentials of the variables it names when the user name is set, and its CA bundle.
func newRegistryClient(spec *v1.SchemaRegistry, getenv func(string) string) (*sr.Client, error) {
	c := readCredentials(getenv, spec.UsernameEnv, spec.PasswordEnv, v1.DefaultSchemaRegistryUsernameEnv, v1.DefaultSchemaRegistryPasswordEnv)
	opts := []sr.ClientOpt{sr.URLs(spec.URL)}
	if c.user != "" {
		opts = append(opts, sr.BasicAuth(c.user, c.pass))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	auth := &registryAuth{base: tr, userEnv: c.userEnv, passEnv: c.passEnv, withUser: c.user != ""}
	if spec.CAFile != "" {
		pool, err := caPool("schemaRegistry.caFile", spec.CAFile)
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	opts = append(opts, sr.HTTPClient(&http.Client{Transport: auth, Timeout: registryTimeout}))
	cl, err := sr.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("schemaRegistry: %w", err)
	}
	return cl, nil
}

// registryAuth turns the registry's 401 and 403 answers, which carry no body the registry
// client could quote (it says "no response"), into an error that says which credentials
// the engine used: the variables, never their values.
type registryAuth struct {
	base             http.RoundTripper
	userEnv, passEnv string
	withUser         bool
}

func (a *registryAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := a.base.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return resp, err
	}
	resp.Body.Close()
	switch {
	case !a.withUser:
		return nil, fmt.Errorf("the schema registry answered %s without credentials: $%s is unset (on Kubernetes, set schemaRegistry.secretName)", resp.Status, a.userEnv)
	case resp.StatusCode == http.StatusUnauthorized:
		return nil, fmt.Errorf("the schema registry answered %s: it refused the user in $%s with the password in $%s", resp.Status, a.userEnv, a.passEnv)
	default:
		return nil, fmt.Errorf("the schema registry answered %s: the user in $%s may not %s %s", resp.Status, a.userEnv, req.Method, req.URL.Path)
	}
}

// valueSubject is the subject of a topic's value schema: spec's, or <topic>-value (the
// topic name strategy).
func valueSubject(spec *v1.SchemaRegistry, topic string) string {
	if spec.Subject != "" {
		return spec.Subject
	}
	return topic + "-value"
}

// avroDecoder decodes records in the Schema Registry wire format with their writer schemas,
// fetched by id and kept, into the source's columns. A column reads the writer's field of
// its name; a column named a__b reads field b of the record in field a when the writer has
// no field a__b. A field the writer lacks reads as null (a reader field defaulting to null);
// a field of a type the column cannot hold by Avro's promotion rules makes every record of
// that writer schema malformed.
type avroDecoder struct {
	cl   *sr.Client
	cols v1.Columns

	mu    sync.Mutex
	plans map[int]*avroPlan
}

// avroPlan is how the records of one writer schema fill the columns.
type avroPlan struct {
	schema avro.Schema
	paths  [][]string // per column; nil when the writer lacks the field
	unions [][]bool   // per column and step of its path: the field's type is a union
	scales []int      // per column: a decimal field's scale
	err    error      // why the writer schema cannot fill the columns
	// flat decodes a record of primitive fields without the generic reader; nil for
	// other schemas (see newFlatPlan).
	flat []flatField
}

func newAvroDecoder(cl *sr.Client, cols v1.Columns) *avroDecoder {
	return &avroDecoder{cl: cl, cols: cols, plans: map[int]*avroPlan{}}
}

// decode fills row[:len(d.cols)] from value.
func (d *avroDecoder) decode(value []byte, row []any, vals *box.Slab) error {
	var h sr.ConfluentHeader
	id, rest, err := h.DecodeID(value)
	if err != nil {
		return fmt.Errorf("not in the Schema Registry wire format: %w", err)
	}
	p, err := d.plan(id)
	if err != nil {
		return err
	}
	if p.flat != nil {
		if err := decodeFlat(p.flat, rest, row[:len(d.cols)], vals); err != nil {
			clear(row[:len(d.cols)])
			return fmt.Errorf("avro (writer schema %d): %w", id, err)
		}
		return nil
	}
	return d.decodeGeneric(p, id, rest, row, vals)
}

// decodeGeneric fills row from b with hamba's generic reader: a map per record, for the
// writer schemas a flat plan does not cover.
func (d *avroDecoder) decodeGeneric(p *avroPlan, id int, b []byte, row []any, vals *box.Slab) error {
	r := avro.NewReader(nil, 0).Reset(b)
	rec, _ := r.ReadNext(p.schema).(map[string]any)
	if r.Error != nil {
		return fmt.Errorf("avro (writer schema %d): %w", id, r.Error)
	}
	for i, path := range p.paths {
		if path == nil {
			continue
		}
		v, err := d.value(rec, path, p.unions[i], p.scales[i], d.cols[i].Type, vals)
		if err != nil {
			return fmt.Errorf("column %s (writer schema %d): %w", d.cols[i].Name, id, err)
		}
		row[i] = v
	}
	return nil
}

// plan returns the plan of writer schema id, fetching the schema on first use. A schema the
// registry does not know is not kept: it may be registered later.
func (d *avroDecoder) plan(id int) (*avroPlan, error) {
	d.mu.Lock()
	p, ok := d.plans[id]
	d.mu.Unlock()
	if !ok {
		ctx, cancel := context.WithTimeout(context.Background(), registryTimeout)
		defer cancel()
		s, err := d.cl.SchemaByID(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("writer schema %d: %w", id, err)
		}
		p = newAvroPlan(s, d.cols)
		d.mu.Lock()
		d.plans[id] = p
		d.mu.Unlock()
	}
	if p.err != nil {
		return nil, fmt.Errorf("writer schema %d: %w", id, p.err)
	}
	return p, nil
}

// newAvroPlan resolves cols against the writer schema s.
func newAvroPlan(s sr.Schema, cols v1.Columns) *avroPlan {
	if s.Type != sr.TypeAvro {
		return &avroPlan{err: fmt.Errorf("is a %s schema, not avro", s.Type)}
	}
	schema, err := avro.ParseWithCache(s.Schema, "", &avro.SchemaCache{})
	if err != nil {
		return &avroPlan{err: fmt.Errorf("parse: %w", err)}
	}
	p := &avroPlan{schema: schema, paths: make([][]string, len(cols)), unions: make([][]bool, len(cols)), scales: make([]int, len(cols))}
	var errs []error
	for i, c := range cols {
		path, unions, leaf := avroField(schema, c.Name)
		if path == nil {
			continue
		}
		p.unions[i] = unions
		if l, ok := nonNull(leaf).(avro.LogicalTypeSchema); ok {
			if dec, ok := l.Logical().(*avro.DecimalLogicalSchema); ok {
				p.scales[i] = dec.Scale()
			}
		}
		if err := avroReadable(leaf, c.Type); err != nil {
			errs = append(errs, fmt.Errorf("column %s (%s): field %s: %w", c.Name, c.Type, strings.Join(path, "."), err))
		}
		p.paths[i] = path
	}
	p.err = errors.Join(errs...)
	if p.err == nil {
		p.flat = newFlatPlan(schema, p.paths, cols)
	}
	return p
}

// avroField finds the field column name reads in the record schema s: the field of that
// name, or the path a__b__c through nested records. It returns a nil path when there is none,
// and for each step whether the field's type is a union (whose value hamba's generic reader
// wraps in a one-entry map).
func avroField(s avro.Schema, name string) ([]string, []bool, avro.Schema) {
	rec, ok := nonNull(s).(*avro.RecordSchema)
	if !ok {
		return nil, nil, nil
	}
	isUnion := func(t avro.Schema) bool { _, ok := t.(*avro.UnionSchema); return ok }
	for _, f := range rec.Fields() {
		if f.Name() == name {
			return []string{name}, []bool{isUnion(f.Type())}, f.Type()
		}
	}
	head, tail, ok := strings.Cut(name, "__")
	if !ok {
		return nil, nil, nil
	}
	for _, f := range rec.Fields() {
		if f.Name() == head {
			if path, unions, leaf := avroField(f.Type(), tail); path != nil {
				return append([]string{head}, path...), append([]bool{isUnion(f.Type())}, unions...), leaf
			}
		}
	}
	return nil, nil, nil
}

// nonNull returns the one non-null branch of a nullable union, else s.
func nonNull(s avro.Schema) avro.Schema {
	if u, ok := s.(*avro.UnionSchema); ok {
		var branch avro.Schema
		for _, t := range u.Types() {
			if t.Type() == avro.Null {
				continue
			}
			if branch != nil {
				return s
			}
			branch = t
		}
		if branch != nil {
			return branch
		}
	}
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema()
	}
	return s
}

// avroLogical returns the logical type of s, "" when none.
func avroLogical(s avro.Schema) avro.LogicalType {
	if l, ok := s.(avro.LogicalTypeSchema); ok && l.Logical() != nil {
		return l.Logical().Type()
	}
	return ""
}

// avroReadable says whether a column of type t can hold the values of writer schema s: Avro's
// promotions (int to long to double, float to double, bytes to string), enums as strings,
// timestamp-millis, timestamp-micros and date as timestamps, decimals as doubles or as exact
// decimal strings.
func avroReadable(s avro.Schema, t v1.ColumnType) error {
	s = nonNull(s)
	typ, logical := s.Type(), avroLogical(s)
	ok := false
	switch t {
	case v1.TypeString:
		ok = typ == avro.String || typ == avro.Enum || (typ == avro.Bytes && (logical == "" || logical == avro.Decimal)) ||
			(typ == avro.Fixed && logical == avro.Decimal)
	case v1.TypeLong:
		ok = (typ == avro.Int || typ == avro.Long) && logical == ""
	case v1.TypeDouble:
		ok = ((typ == avro.Int || typ == avro.Long) && logical == "") || typ == avro.Float || typ == avro.Double ||
			logical == avro.Decimal
	case v1.TypeBoolean:
		ok = typ == avro.Boolean
	case v1.TypeTimestamp:
		ok = (typ == avro.Long && (logical == avro.TimestampMillis || logical == avro.TimestampMicros)) ||
			(typ == avro.Int && logical == avro.Date)
	}
	if !ok {
		what := string(typ)
		if logical != "" {
			what += " (" + string(logical) + ")"
		}
		return fmt.Errorf("the writer's %s cannot be read as %s", what, t)
	}
	return nil
}

// value walks path through the decoded record and converts the leaf to the column's type.
func (d *avroDecoder) value(rec map[string]any, path []string, unions []bool, scale int, t v1.ColumnType, vals *box.Slab) (any, error) {
	var v any = rec
	for j, name := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil, nil // a null record on the way
		}
		v = m[name]
		if unions[j] {
			v = unwrapUnion(v)
		}
	}
	switch v := v.(type) {
	case nil:
		return nil, nil
	case string:
		return vals.String(v), nil
	case []byte:
		return vals.Bytes(v), nil
	case bool:
		return v, nil
	case int:
		if t == v1.TypeDouble {
			return vals.Float64(float64(v)), nil
		}
		return vals.Int64(int64(v)), nil
	case int32:
		if t == v1.TypeDouble {
			return vals.Float64(float64(v)), nil
		}
		return vals.Int64(int64(v)), nil
	case int64:
		if t == v1.TypeDouble {
			return vals.Float64(float64(v)), nil
		}
		return vals.Int64(v), nil
	case float32:
		return vals.Float64(float64(v)), nil
	case float64:
		return vals.Float64(v), nil
	case time.Time:
		return vals.Time(v), nil
	case *big.Rat:
		if t == v1.TypeString {
			return vals.String(v.FloatString(scale)), nil
		}
		f, _ := v.Float64()
		return vals.Float64(f), nil
	}
	return nil, fmt.Errorf("unexpected value %T", v)
}

// unwrapUnion returns the value of a union's branch, which hamba's generic reader gives as a
// one-entry map from the branch's type name (nil for the null branch).
func unwrapUnion(v any) any {
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		for _, inner := range m {
			return inner
		}
	}
	return v
}

// checkLatest is the source's start guard: it reads the latest schema of subject (Avro, or
// the first message of a Protobuf schema) and says which column it lacks or holds in another
// type. A subject the registry does not have yet passes: nothing was written.
func checkLatest(ctx context.Context, cl *sr.Client, subject string, cols v1.Columns) error {
	ctx, cancel := context.WithTimeout(ctx, registryTimeout)
	defer cancel()
	s, err := cl.SchemaByVersion(ctx, subject, -1)
	var re *sr.ResponseError
	if errors.As(err, &re) && re.StatusCode == http.StatusNotFound {
		return nil
	}
	if err != nil {
		return fmt.Errorf("schema registry: latest schema of subject %s: %w", subject, err)
	}
	var errs []error
	missing := func(i int) { errs = append(errs, fmt.Errorf("column %s: no field %s", cols[i].Name, cols[i].Name)) }
	if s.Type == sr.TypeJSON {
		if err := jsonSchemaFits(s.Schema.Schema, cols); err != nil {
			errs = append(errs, err)
		}
	} else if s.Type == sr.TypeProtobuf {
		f, err := compileProto(ctx, s.Schema.Schema)
		if err != nil || f.Messages().Len() == 0 {
			return fmt.Errorf("schema registry: latest schema of subject %s: %v", subject, err)
		}
		p := newProtoPlan(f.Messages().Get(0), cols)
		if p.err != nil {
			errs = append(errs, p.err)
		}
		for i, path := range p.paths {
			if path == nil {
				missing(i)
			}
		}
	} else {
		p := newAvroPlan(s.Schema, cols)
		if p.err != nil {
			errs = append(errs, p.err)
		}
		for i, path := range p.paths {
			if path == nil && p.schema != nil {
				missing(i)
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("the latest schema of subject %s (version %d, id %d) does not fit the source's columns: %w; "+
			"fix the columns or the subject", subject, s.Version, s.ID, err)
	}
	return nil
}

// avroEncoder encodes output rows as Avro records of a schema derived from the output
// columns, each field a union of null and the column's type (timestamps as
// timestamp-micros), in the Schema Registry wire format.
type avroEncoder struct {
	id   int
	cols v1.Columns
}

// avroSchemaFor derives the value schema of the output columns: a record named after the
// subject, each column a field ["null", type] defaulting to null.
func avroSchemaFor(subject string, cols v1.Columns) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"type":"record","name":%q,"namespace":"lockstep","fields":[`, avroName(subject))
	for i, c := range cols {
		if i > 0 {
			b.WriteByte(',')
		}
		var t string
		switch c.Type {
		case v1.TypeLong:
			t = `"long"`
		case v1.TypeDouble:
			t = `"double"`
		case v1.TypeBoolean:
			t = `"boolean"`
		case v1.TypeTimestamp:
			t = `{"type":"long","logicalType":"timestamp-micros"}`
		default:
			t = `"string"`
		}
		fmt.Fprintf(&b, `{"name":%q,"type":["null",%s],"default":null}`, c.Name, t)
	}
	b.WriteString("]}")
	return b.String()
}

// avroName turns s into an Avro name: letters, digits and underscores, not starting with a digit.
func avroName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			b[i] = '_'
		}
	}
	if len(b) == 0 || b[0] >= '0' && b[0] <= '9' {
		b = append([]byte{'_'}, b...)
	}
	return string(b)
}

// append appends one row's record, header included.
func (e *avroEncoder) append(b []byte, row []any) ([]byte, error) {
	b = append(b, 0)
	b = binary.BigEndian.AppendUint32(b, uint32(e.id))
	for i, c := range e.cols {
		v := row[i]
		if v == nil {
			b = append(b, 0) // branch 0: null
			continue
		}
		b = append(b, 2) // branch 1, zigzag
		switch c.Type {
		case v1.TypeLong:
			n, ok := v.(int64)
			if !ok {
				return nil, fmt.Errorf("column %s: %T is not a long", c.Name, v)
			}
			b = binary.AppendVarint(b, n)
		case v1.TypeDouble:
			f, ok := v.(float64)
			if !ok {
				return nil, fmt.Errorf("column %s: %T is not a double", c.Name, v)
			}
			b = binary.LittleEndian.AppendUint64(b, math.Float64bits(f))
		case v1.TypeBoolean:
			t, ok := v.(bool)
			if !ok {
				return nil, fmt.Errorf("column %s: %T is not a boolean", c.Name, v)
			}
			if t {
				b = append(b, 1)
			} else {
				b = append(b, 0)
			}
		case v1.TypeTimestamp:
			t, ok := v.(time.Time)
			if !ok {
				return nil, fmt.Errorf("column %s: %T is not a timestamp", c.Name, v)
			}
			b = binary.AppendVarint(b, t.UnixMicro())
		default:
			var s string
			switch v := v.(type) {
			case string:
				s = v
			case []byte:
				s = string(v)
			default:
				s = fmt.Sprint(v)
			}
			b = binary.AppendVarint(b, int64(len(s)))
			b = append(b, s...)
		}
	}
	return b, nil
}

// IncompatibleSchemaError is a Schema Registry's refusal of the value schema a Kafka sink
// derived from its output columns: the subject's compatibility rule forbids the change.
type IncompatibleSchemaError struct {
	Subject string
	// Rule is the subject's compatibility level, such as BACKWARD.
	Rule string
	// Field is the field the change breaks, "" when not found.
	Field string
	// Reason says what breaks the rule.
	Reason string
	// Latest is the subject's latest version.
	Latest int
	// Err is the registry's answer.
	Err error
}

func (e *IncompatibleSchemaError) Error() string {
	field := ""
	if e.Field != "" {
		field = fmt.Sprintf(" field %s: %s;", e.Field, e.Reason)
	}
	return fmt.Sprintf("schema registry subject %s refuses the sink's value schema under its %s compatibility rule "+
		"(latest version %d):%s registry said: %v; keep the output columns compatible, or change the subject's "+
		"compatibility or schemaRegistry.subject", e.Subject, e.Rule, e.Latest, field, e.Err)
}

func (e *IncompatibleSchemaError) Unwrap() error { return e.Err }

// register registers schema under subject (or finds it registered there) and returns its
// id. A refusal by the subject's compatibility rule is an [IncompatibleSchemaError] naming
// the rule and, by why over the subject's latest schema, the field that breaks it.
func register(ctx context.Context, cl *sr.Client, subject string, schema sr.Schema, why func(ctx context.Context, latest, rule string) (field, reason string)) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, registryTimeout)
	defer cancel()
	s, err := cl.CreateSchema(ctx, subject, schema)
	if err == nil {
		return s.ID, nil
	}
	var re *sr.ResponseError
	if !errors.As(err, &re) || re.StatusCode != http.StatusConflict {
		return 0, fmt.Errorf("schema registry: register the value schema under subject %s: %w", subject, err)
	}
	ie := &IncompatibleSchemaError{Subject: subject, Rule: "unknown", Err: err}
	if rs := cl.Compatibility(ctx, subject); len(rs) == 1 && rs[0].Err == nil && rs[0].Level != sr.CompatNone {
		ie.Rule = rs[0].Level.String()
	} else if rs := cl.Compatibility(ctx); len(rs) == 1 && rs[0].Err == nil {
		ie.Rule = rs[0].Level.String()
	}
	if latest, lerr := cl.SchemaByVersion(ctx, subject, -1); lerr == nil {
		ie.Latest = latest.Version
		ie.Field, ie.Reason = why(ctx, latest.Schema.Schema, ie.Rule)
	}
	return 0, ie
}

// registerAvro registers the Avro schema of cols under subject and returns its id.
func registerAvro(ctx context.Context, cl *sr.Client, subject string, cols v1.Columns) (int, error) {
	text := avroSchemaFor(subject, cols)
	return register(ctx, cl, subject, sr.Schema{Schema: text, Type: sr.TypeAvro}, func(_ context.Context, latest, rule string) (string, string) {
		return avroBreak(latest, text, rule)
	})
}

// avroBreak finds the first field by which the new schema breaks rule against the old one.
func avroBreak(oldText, newText, rule string) (field, reason string) {
	oldS, err1 := avro.ParseWithCache(oldText, "", &avro.SchemaCache{})
	newS, err2 := avro.ParseWithCache(newText, "", &avro.SchemaCache{})
	if err1 != nil || err2 != nil {
		return "", ""
	}
	oldR, ok1 := oldS.(*avro.RecordSchema)
	newR, ok2 := newS.(*avro.RecordSchema)
	if !ok1 || !ok2 {
		return "", ""
	}
	backward := strings.HasPrefix(rule, "BACKWARD") || strings.HasPrefix(rule, "FULL")
	forward := strings.HasPrefix(rule, "FORWARD") || strings.HasPrefix(rule, "FULL")
	compat := avro.NewSchemaCompatibility()
	olds := map[string]*avro.Field{}
	for _, f := range oldR.Fields() {
		olds[f.Name()] = f
	}
	for _, nf := range newR.Fields() {
		of, ok := olds[nf.Name()]
		if !ok {
			if backward && !nf.HasDefault() {
				return nf.Name(), "added without a default: the new schema cannot read older records"
			}
			continue
		}
		delete(olds, nf.Name())
		if backward {
			if err := compat.Compatible(nf.Type(), of.Type()); err != nil {
				return nf.Name(), fmt.Sprintf("changed from %s to %s: the new schema cannot read older records (%v)",
					of.Type().String(), nf.Type().String(), err)
			}
		}
		if forward {
			if err := compat.Compatible(of.Type(), nf.Type()); err != nil {
				return nf.Name(), fmt.Sprintf("changed from %s to %s: readers of the older schema cannot read new records (%v)",
					of.Type().String(), nf.Type().String(), err)
			}
		}
	}
	if forward {
		for _, of := range oldR.Fields() {
			if _, gone := olds[of.Name()]; gone && !of.HasDefault() {
				return of.Name(), "removed, and it has no default in the older schema: its readers cannot read new records"
			}
		}
	}
	return "", ""
}

// valueEncoder appends one row's record value, in a Schema Registry format.
type valueEncoder interface {
	append(b []byte, row []any) ([]byte, error)
}

// newValueEncoder registers the value schema of cols under subject, in format f, and returns
// the encoder of its records.
func newValueEncoder(ctx context.Context, cl *sr.Client, f v1.KafkaFormat, spec *v1.SchemaRegistry, subject string, cols v1.Columns) (valueEncoder, error) {
	if spec.Version != nil {
		return pinnedEncoder(ctx, cl, f, subject, int(*spec.Version), cols)
	}
	if f == v1.KafkaProtobuf {
		id, err := registerProto(ctx, cl, subject, cols)
		if err != nil {
			return nil, err
		}
		return newProtoEncoder(ctx, id, subject, cols)
	}
	if f == v1.KafkaJSONSchema {
		id, err := registerJSONSchema(ctx, cl, subject, cols)
		if err != nil {
			return nil, err
		}
		return newJSONSchemaEncoder(id, cols)
	}
	id, err := registerAvro(ctx, cl, subject, cols)
	if err != nil {
		return nil, err
	}
	return &avroEncoder{id: id, cols: cols}, nil
}
