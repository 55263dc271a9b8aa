package pgserver_test

import (
	"errors"
	"strings"
	"testing"

	v1 "github.com/lockstep-dev/lockstep/api/v1"
	"github.com/lockstep-dev/lockstep/internal/pgserver"
)

func TestOf(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://app:secret@DB1.example.com:6432/shop?sslmode=verify-full": "db1.example.com:6432/shop",
		"postgres://app:secret@db1.example.com/shop":                          "db1.example.com:5432/shop",
		"host=db1.example.com port=6432 dbname=shop user=app password=secret": "db1.example.com:6432/shop",
		"postgres://app@db1:5432,db2:5432/shop":                               "db1:5432/shop",
	} {
		got, err := pgserver.Of(dsn)
		if err != nil || got != want {
			t.Errorf("Of(%q) = %q, %v; want %q", dsn, got, err, want)
		}
	}
	for _, dsn := range []string{"", "postgres://app:hunter2@db1:notaport/shop"} {
		_, err := pgserver.Of(dsn)
		if !errors.Is(err, pgserver.ErrUnreadable) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Of(%q) error = %v; want ErrUnreadable, without the password", dsn, err)
		}
	}
}

func TestFromSecretAndEnv(t *testing.T) {
	got, err := pgserver.FromSecret("db", map[string][]byte{"dsn": []byte("postgres://u:p@db1/shop")})
	if err != nil || got != "db1:5432/shop" {
		t.Errorf("FromSecret = %q, %v", got, err)
	}
	if _, err := pgserver.FromSecret("db", map[string][]byte{"url": []byte("postgres://db1/shop")}); !errors.Is(err, pgserver.ErrUnreadable) || !strings.Contains(err.Error(), `"dsn"`) {
		t.Errorf("FromSecret without the dsn key: %v", err)
	}
	env := map[string]string{"SHOP_DSN": "postgres://u:p@db2:6432/shop", v1.PostgresDSNEnv: "postgres://u:p@db3/shop"}
	getenv := func(k string) string { return env[k] }
	if got, err := pgserver.FromEnv(v1.PostgresConnection{DSNEnv: "SHOP_DSN"}, getenv); err != nil || got != "db2:6432/shop" {
		t.Errorf("FromEnv(SHOP_DSN) = %q, %v", got, err)
	}
	if got, err := pgserver.FromEnv(v1.PostgresConnection{SecretName: "db"}, getenv); err != nil || got != "db3:5432/shop" {
		t.Errorf("FromEnv(secret) = %q, %v", got, err)
	}
	if _, err := pgserver.FromEnv(v1.PostgresConnection{DSNEnv: "UNSET"}, getenv); !errors.Is(err, pgserver.ErrUnreadable) || !strings.Contains(err.Error(), "UNSET") {
		t.Errorf("FromEnv(UNSET) error = %v", err)
	}
}
