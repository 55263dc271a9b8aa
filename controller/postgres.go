package controller

import (
	"context"
	"fmt"

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
	pg := q.Spec.Sink.Postgres
	if pg == nil {
		return compat.WithPostgresServer(""), ""
	}
	name := pg.Connection.SecretName
	if name == "" {
		return compat.WithPostgresServer(""), ""
	}
	var sec corev1.Secret
	if err := reader.Get(ctx, types.NamespacedName{Namespace: q.Namespace, Name: name}, &sec); err != nil {
		return compat.WithPostgresServer(""), fmt.Sprintf("read Secret %s/%s: %v: the postgres sink is judged by the Secret's name, not by its server and database", q.Namespace, name, err)
	}
	server, err := pgserver.FromSecret(q.Namespace+"/"+name, sec.Data)
	if err != nil {
		return compat.WithPostgresServer(""), err.Error() + ": the postgres sink is judged by the Secret's name, not by its server and database"
	}
	return compat.WithPostgresServer(server), ""
}
