package controller

import (
	"context"
	"errors"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/checkpoint"
	"github.com/lockstep-dev/lockstep/checkpoint/sparkckpt"
	"github.com/lockstep-dev/lockstep/compat"
	"github.com/lockstep-dev/lockstep/plan"
)

// judge decides whether a query may run as its spec says. Admission (is the change to be
// stored?) and the reconciler (may the engine run it?) ask the same questions in the same
// order, and both ask this one function:
//
//  1. the spec's own validation and its Secret references;
//  2. its placement: the store exists and allows the namespace, the location is the
//     namespace's (and, when refuseDeletingStore, the store is not being deleted);
//  3. its location is no other query's, nor inside or around one;
//     the Secrets the spec names exist in its namespace (else it waits for them);
//  4. the checkpoint at the location, read within budget;
//  5. the checkpoint's owner;
//  6. compat.Judge, the one judge, of the spec against the shape the committed batches ran
//     under; for a spark query whose records hold no committed batch, against a Spark
//     checkpoint at the location (one a Spark job Lockstep did not start wrote), as the
//     engine judges it before it adopts it.
//
// What it finds is a judgement, data each caller renders in its own terms: admission as
// denials with field paths and warnings, the reconciler as conditions and what the engine
// runs. A judge is a value built per request; it is safe for concurrent use when its
// functions are.
type judge struct {
	checkpoints checkpoints
	// queries reads StreamingQueries with the location index (the manager's cache).
	queries client.Reader
	// budget bounds step 4, the store's access check and its Secret included.
	budget time.Duration
	// read reads the checkpoint of q at p for step 4; ctx carries the budget. A missing
	// credentials Secret is a *secretMissingError and a store that refuses the query wraps
	// errStoreRefused; any other error leaves the checkpoint unread.
	read func(ctx context.Context, cps checkpoints, q *v1.StreamingQuery, p placement) (snapshot, error)
	// postgres returns the compat option that names the server of q's postgres sink, and a
	// note when it could not be read (see postgresServer).
	postgres func(ctx context.Context, q *v1.StreamingQuery) (compat.Option, string)
	// refuseDeletingStore refuses a query whose store is being deleted. The reconciler does
	// (the engine stops); admission does not, so that the query can still be changed, to
	// point it at another store or suspend it.
	refuseDeletingStore bool
}

// A judgement is what the judge found. The steps after a refusal, or after a checkpoint that
// could not be read, did not run: their fields are zero.
type judgement struct {
	// placement is the query's store and effective location (spec.checkpoint.location, or
	// the store's template when the webhook did not default it). Zero when the spec is
	// invalid.
	placement
	// located is the query with its effective location. Nil when the spec or its placement
	// is refused.
	located *v1.StreamingQuery
	// refusal is why the query cannot run as specified; nil when nothing refuses it.
	refusal *refusal
	// unreachable is why the checkpoint could not be read; nil when it was read, or a
	// refusal came first.
	unreachable *unreachableError
	// snap is what was read of the checkpoint.
	snap snapshot
	// foreign is the refusal of a checkpoint that belongs to another query (on
	// spec.checkpoint.location); nil when it is the query's, or there is none.
	foreign *field.Error
	// verdict is compat.Judge's; nil when the checkpoint was not read.
	verdict *compat.Verdict
	// blocked is true when the checkpoint refuses the spec: the verdict rejects it, or the
	// checkpoint belongs to another query.
	blocked bool
	// postgresNote says why the postgres sink was judged by its Secret's name, not by its
	// server; "" when it was not.
	postgresNote string
}

// A refusal is why a query cannot run as specified, in the terms of each of its readers.
type refusal struct {
	// reason is the conditions' reason: v1.ReasonInvalidSpec, v1.ReasonStoreRefused or
	// v1.ReasonSecretMissing.
	reason string
	// err is what the status says.
	err error
	// errs are the refused fields with their paths, as admission denies them. A missing
	// Secret (v1.ReasonSecretMissing) has none: the query waits for it, and admission admits
	// it with a warning. Nor has the API server's refusal of the engine's workload, which
	// only the reconciler meets (see workloadRefusal).
	errs field.ErrorList
	// revoked is true when the store does not let the query write (gone, being deleted, its
	// namespace no longer allowed, its credentials missing): no engine may run until it does.
	revoked bool
	// at is the field that names the missing Secret of a v1.ReasonSecretMissing refusal,
	// for admission's warning.
	at *field.Path
}

// An unreachableError is a checkpoint that could not be read.
type unreachableError struct {
	// budget is the judge's budget when it ran out (the store is slow or hangs), else 0.
	budget time.Duration
	// err is what the read was doing.
	err error
}

func (e *unreachableError) Error() string {
	if e.budget > 0 {
		return fmt.Sprintf("the store did not answer within %s: %v", e.budget, e.err)
	}
	return e.err.Error()
}

func (e *unreachableError) Unwrap() error { return e.err }

// check judges q. Its error is for failures worth a retry (the API server did not answer);
// everything else it finds is in the judgement.
func (j judge) check(ctx context.Context, q *v1.StreamingQuery) (judgement, error) {
	var jm judgement
	if errs := append(plan.Validate(q), ValidateSecretRefs(q)...); len(errs) > 0 {
		jm.refusal = &refusal{reason: v1.ReasonInvalidSpec, err: errs.ToAggregate(), errs: errs}
		return jm, nil
	}
	if err := j.place(ctx, q, &jm); err != nil || jm.refusal != nil {
		return jm, err
	}
	spark := j.readCheckpoint(ctx, q, &jm)
	if jm.refusal != nil || jm.unreachable != nil {
		return jm, nil
	}
	if !jm.snap.ownedBy(q) {
		jm.foreign = field.Forbidden(field.NewPath("spec", "checkpoint", "location"),
			fmt.Sprintf("the checkpoint at %s belongs to %s: give this query its own location", jm.location, jm.snap.meta.Owner))
	}
	pg, note := j.postgres(ctx, q)
	facts := compat.Facts{Spark: spark}
	if jm.snap.shaped {
		facts.Committed = &jm.snap.shape
	}
	judged, err := compat.Judge(facts, &jm.located.Spec, pg)
	if err != nil {
		// Validation passed, so the shape is one this version cannot build: the spec
		// stays refused until it changes, as an invalid one.
		errs := field.ErrorList{field.Invalid(field.NewPath("spec"), "", err.Error())}
		jm.refusal = &refusal{reason: v1.ReasonInvalidSpec, err: errs.ToAggregate(), errs: errs}
		return jm, nil
	}
	if judged.RebuildAnswers() && jm.snap.shaped {
		// The third way forward: what a rebuild would replay, read only for such a refusal.
		if facts.Rebuild = j.rebuildFacts(ctx, q, jm.placement); facts.Rebuild != nil {
			if again, err := compat.Judge(facts, &jm.located.Spec, pg); err == nil {
				judged = again
			}
		}
	}
	v := judged.Verdict
	jm.verdict, jm.postgresNote = &v, note
	jm.blocked = v.Severity == compat.Rejected || jm.foreign != nil
	return jm, nil
}

// rebuildFacts reads, within the budget, what rebuilding q's state would replay; nil when the
// checkpoint cannot be read (the refusal then offers the other two ways only).
func (j judge) rebuildFacts(ctx context.Context, q *v1.StreamingQuery, p placement) *compat.Rebuild {
	ctx, cancel := context.WithTimeout(ctx, j.budget)
	defer cancel()
	store, err := j.checkpoints.open(ctx, q.Namespace, p, true)
	if err != nil {
		return nil
	}
	cp, err := checkpoint.Load(ctx, store)
	if err != nil {
		return nil
	}
	r := compat.ReadRebuild(ctx, cp)
	if r.Impossible == "" {
		r.Unchecked = "admission does not connect to the sources; the query's pod asks them before it rebuilds"
	}
	return r
}

// place finds q's store and location and decides whether q may use them: the store admits
// it, no other query shares the location, and the Secrets it names exist. It sets
// jm.placement and jm.located, or jm.refusal; its error is for failures worth a retry.
func (j judge) place(ctx context.Context, q *v1.StreamingQuery, jm *judgement) error {
	p, refused, err := j.checkpoints.locate(ctx, q)
	if err != nil {
		return err
	}
	jm.placement = p
	if len(refused) == 0 && j.refuseDeletingStore {
		refused = storeDeleting(p.store)
	}
	if len(refused) > 0 {
		jm.refusal = &refusal{reason: v1.ReasonStoreRefused, err: revokedError(refused.ToAggregate()), errs: refused, revoked: true}
		return nil
	}
	others, err := overlapping(ctx, j.queries, p.location)
	if err != nil {
		return err
	}
	jm.located = q.DeepCopy()
	jm.located.Spec.Checkpoint.Location = p.location
	if errs := ValidateUniqueLocation(jm.located, others); len(errs) > 0 {
		jm.refusal = &refusal{reason: v1.ReasonStoreRefused, err: errs.ToAggregate(), errs: errs}
		return nil
	}

	secrets := j.checkpoints.cache
	if secrets == nil {
		secrets = j.checkpoints.reader
	}
	absent, err := absentSecret(ctx, secrets, q)
	if err != nil {
		return err
	}
	if absent != nil {
		// As for the store's Secret below, the query waits for it; but an engine already
		// running holds the values it started with and is left running.
		jm.refusal = &refusal{reason: v1.ReasonSecretMissing, err: errors.New(absentSecretMessage(q.Namespace, absent)), at: absent.field}
	}
	return nil
}

// readCheckpoint reads the checkpoint at jm's placement within the judge's budget into
// jm.snap, and returns the Spark checkpoint there when the location holds one that Lockstep
// has not run yet. What stops the judging it records in jm.refusal or jm.unreachable.
func (j judge) readCheckpoint(ctx context.Context, q *v1.StreamingQuery, jm *judgement) *sparkckpt.Checkpoint {
	rctx, cancel := context.WithTimeout(ctx, j.budget)
	snap, err := j.read(rctx, j.checkpoints, q, jm.placement)
	var spark *sparkckpt.Checkpoint
	if err == nil && jm.records != "" && !snap.shaped && snap.head.Committed == nil {
		spark, err = j.checkpoints.readSpark(rctx, q.Namespace, jm.placement)
	}
	overBudget := rctx.Err() != nil && ctx.Err() == nil
	cancel()
	if missing := (*secretMissingError)(nil); errors.As(err, &missing) {
		// Pods wait for their Secrets, and so does a query: `kubectl apply -f dir/` may
		// create the query before the Secret. No engine runs until it exists; its creation
		// reconciles the query at once.
		jm.refusal = &refusal{reason: v1.ReasonSecretMissing, err: errors.New(missing.waiting()), revoked: true,
			at: field.NewPath("spec", "checkpoint", "store")}
		return nil
	}
	if errors.Is(err, errStoreRefused) {
		jm.refusal = &refusal{reason: v1.ReasonStoreRefused, err: revokedError(err), revoked: true,
			errs: field.ErrorList{field.Invalid(field.NewPath("spec", "checkpoint", "store"), q.Spec.Checkpoint.Store, err.Error())}}
		return nil
	}
	if err != nil {
		jm.unreachable = &unreachableError{err: err}
		if overBudget {
			jm.unreachable.budget = j.budget
		}
		return nil
	}
	jm.snap = snap
	return spark
}
