package controller

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/compat"
	"github.com/lockstep-dev/lockstep/internal/pgserver"
)

// postgresServer returns the compat option naming the server and database of the query's
// postgres sink, read from the connection's Secret in the query's namespace as the engine
// receives it (internal/pgserver, as the engine derives it from its environment), so that
// the sink is judged by what it writes and not by the Secret's name. When it cannot be read
// (a Secret missing or without a readable dsn), it returns the option of no server, so that
// the Secret's name stands in, and a note saying why. A dsnEnv connection's variable is set
// in the engine pod by the platform, which the controller cannot see: its name stands in,
// without a note (compat's finding says so when the name changes).
func postgresServer(ctx context.Context, reader client.Reader, q *v1.StreamingQuery) (compat.Option, string) {
	server, note := postgresServerOf(ctx, reader, q)
	return compat.WithPostgresServer(server), note
}

// postgresServerOf is postgresServer's server ("" when not read) and note.
func postgresServerOf(ctx context.Context, reader client.Reader, q *v1.StreamingQuery) (string, string) {
	pg := q.Spec.Sink.Postgres
	if pg == nil || pg.Connection.SecretName == "" {
		return "", ""
	}
	name := pg.Connection.SecretName
	var sec corev1.Secret
	if err := reader.Get(ctx, types.NamespacedName{Namespace: q.Namespace, Name: name}, &sec); err != nil {
		return "", fmt.Sprintf("read Secret %s/%s: %v: the postgres sink is judged by the Secret's name, not by its server and database", q.Namespace, name, err)
	}
	server, err := pgserver.FromSecret(q.Namespace+"/"+name, sec.Data)
	if err != nil {
		return "", err.Error() + ": the postgres sink is judged by the Secret's name, not by its server and database"
	}
	return server, ""
}

// pgServers remembers, per query, the server its postgres sink's Secret named when it was
// last read, for the reconciler: as for the store's Secret (see poller), a steady resync
// reads no Secret; a new generation of the query, another Secret, a new version of it in the
// cache of Secrets' metadata or a failed read read it again. It is safe for concurrent use.
type pgServers struct {
	mu sync.Mutex
	m  map[types.NamespacedName]pgServerEntry
}

type pgServerEntry struct {
	generation int64
	secret     string
	version    string // the Secret's resourceVersion when read
	server     string
}

// forget drops the memory of a query (it was deleted).
func (c *pgServers) forget(q types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, q)
}

// option returns postgresServer's option for q, from memory when it may; secrets is the
// cache of Secrets' metadata.
func (c *pgServers) option(ctx context.Context, reader, secrets client.Reader, q *v1.StreamingQuery) compat.Option {
	pg := q.Spec.Sink.Postgres
	if pg == nil || pg.Connection.SecretName == "" {
		return compat.WithPostgresServer("")
	}
	name := types.NamespacedName{Namespace: q.Namespace, Name: q.Name}
	version, err := secretVersion(ctx, secrets, q.Namespace, pg.Connection.SecretName)
	c.mu.Lock()
	e, ok := c.m[name]
	c.mu.Unlock()
	if ok && err == nil && version != "" && e.generation == q.Generation && e.secret == pg.Connection.SecretName && e.version == version {
		return compat.WithPostgresServer(e.server)
	}
	server, note := postgresServerOf(ctx, reader, q)
	c.mu.Lock()
	defer c.mu.Unlock()
	if note != "" || err != nil {
		delete(c.m, name)
	} else {
		if c.m == nil {
			c.m = map[types.NamespacedName]pgServerEntry{}
		}
		c.m[name] = pgServerEntry{generation: q.Generation, secret: pg.Connection.SecretName, version: version, server: server}
	}
	return compat.WithPostgresServer(server)
}
