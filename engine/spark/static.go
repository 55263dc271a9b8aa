package spark

import (
	"context"
	"fmt"
	"os"
	"time"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/s3"
	"github.com/lockstep-dev/lockstep/engine"
	"github.com/lockstep-dev/lockstep/engine/delta"
	"github.com/lockstep-dev/lockstep/engine/source"
	"github.com/lockstep-dev/lockstep/internal/storeconn"
)

// StaticPin is the snapshot of a stream–static join's right side that a run reads: a Delta
// table's version, or a folder's files.
type StaticPin struct {
	// Version is a Delta table's version (Files is nil then).
	Version int64
	// Files are a folder's files, as locations; empty (not nil) for a folder that was empty.
	Files []string
}

// pinStatics decides the snapshot each stream–static join on a files folder or a Delta table
// joins in this run, as the built-in engine keeps it: the one the newest batch in Lockstep's
// records joined (head's planned entry), else the side's newest now (the first run, a
// join that the records do not know, or one whose table changed since). It returns the pins by join name and the snapshots to
// record in each batch's entry (checkpoint.Offsets.Joins, in the built-in engine's form).
// A recorded folder's file gone or rewritten since is an error naming it, as a replay on
// the built-in engine is. A PostgreSQL side has no snapshot to pin (docs/spark.md).
func (q *Query) pinStatics(ctx context.Context, head checkpoint.Head, now time.Time) (map[string]StaticPin, []checkpoint.JoinSnapshot, error) {
	pins := map[string]StaticPin{}
	var recs []checkpoint.JoinSnapshot
	for i := range q.plan.Steps {
		st := &q.plan.Steps[i]
		if st.Spec.Join == nil || st.Spec.Join.Static == nil {
			continue
		}
		side, name := st.Spec.Join.Static, st.JoinName
		env := engine.StaticEnv{Join: name, Open: staticOpener(side.S3Connection(), name), Getenv: os.Getenv, Logger: q.opts.Logger.With("join", name)}
		var latest func(context.Context) (engine.Snapshot, error)
		var pinOf func(engine.Snapshot) (StaticPin, error)
		switch side.Kind() {
		case v1.StaticFilesKind:
			t, err := source.NewStaticFiles(ctx, side, env)
			if err != nil {
				return nil, nil, fmt.Errorf("join %s: %w", name, err)
			}
			f := t.(*source.StaticFiles)
			latest = f.Latest
			pinOf = func(sn engine.Snapshot) (StaticPin, error) {
				files, err := f.Files(ctx, sn)
				return StaticPin{Files: files}, err
			}
		case v1.StaticDeltaKind:
			t, err := delta.NewStatic(ctx, side, env)
			if err != nil {
				return nil, nil, fmt.Errorf("join %s: %w", name, err)
			}
			d := t.(*delta.Static)
			latest = d.Latest
			pinOf = func(sn engine.Snapshot) (StaticPin, error) {
				v, err := d.Version(sn)
				return StaticPin{Version: v}, err
			}
		default:
			continue
		}
		var rec checkpoint.JoinSnapshot
		var ok bool
		if head.Planned != nil {
			rec, ok = head.Planned.Join(name)
		}
		if ok && rec.Side != "" && rec.Side != side.ID() {
			ok = false // the join's table changed: the recorded snapshot is of the old one
		}
		if !ok {
			sn, err := latest(ctx)
			if err != nil {
				return nil, nil, fmt.Errorf("join %s: find the static side's newest snapshot: %w", name, err)
			}
			rec = checkpoint.JoinSnapshot{Join: name, ReadAtMs: now.UnixMilli(), Snapshot: sn, Side: side.ID()}
		}
		pin, err := pinOf(rec.Snapshot)
		if err != nil {
			return nil, nil, fmt.Errorf("join %s: %w", name, err)
		}
		pins[name] = pin
		recs = append(recs, rec)
	}
	return pins, recs, nil
}

// staticOpener opens a static side's location with the environment's S3 settings, and conn
// (the side's own spec.s3, credentials under the join's name) on top, as the built-in engine
// opens it.
func staticOpener(conn *v1.S3Connection, join string) engine.FolderOpener {
	return func(location string) (checkpoint.Store, error) {
		env, err := storeconn.Resolve(os.Getenv, storeconn.From{})
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", location, err)
		}
		opts := []s3.Option{s3.WithSettings(env)}
		if conn != nil {
			own, err := storeconn.Resolve(os.Getenv, storeconn.From{Conn: conn, Name: join})
			if err != nil {
				return nil, fmt.Errorf("open %s: %w", location, err)
			}
			opts = append(opts, s3.WithSettings(own))
		}
		return s3.OpenFolder(location, opts...)
	}
}
