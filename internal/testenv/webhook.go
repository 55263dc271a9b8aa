package testenv

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// WebhookControlPlane is a Kubernetes control plane whose API server calls the admission
// webhooks of config/webhook at an address this test binary holds open for its whole life:
// give a manager Server() as its webhook server, or hand Serve a handler.
//
// The address is listened on before the API server learns it and never closed: a port
// released between one manager and the next can be taken by any connection's ephemeral
// port meanwhile (it happened: "bind: address already in use" for the next manager).
type WebhookControlPlane struct {
	Config  *rest.Config
	CertDir string // tls.crt and tls.key, the certificate the API server trusts
	CAData  []byte // the CA that signed it (PEM)
	serving *webhookServing
}

// webhookServing routes the held address's requests to the one handler serving now.
type webhookServing struct {
	mu      sync.Mutex
	handler http.Handler
	serves  int // how many handlers Serve has been given
}

func (s *webhookServing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	h := s.handler
	s.mu.Unlock()
	if h == nil {
		http.Error(w, "no manager serves Lockstep's webhooks in this test binary now", http.StatusServiceUnavailable)
		return
	}
	h.ServeHTTP(w, r)
}

// Serve makes h answer the API server's webhook calls until stop is called. Only one
// handler serves at a time: Serve fails while another does.
func (cp *WebhookControlPlane) Serve(h http.Handler) (stop func(), err error) {
	s := cp.serving
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.handler != nil {
		return nil, errors.New("another manager serves the webhooks of this control plane; stop it first (one at a time)")
	}
	s.handler = h
	s.serves++
	mine := s.serves
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.serves == mine { // a second call must not stop a later handler
			s.handler = nil
		}
	}, nil
}

// Server returns a webhook server for one manager: it serves the webhooks registered with
// it on the held address while the manager runs.
func (cp *WebhookControlPlane) Server() webhook.Server {
	return &heldServer{cp: cp, mux: http.NewServeMux()}
}

// heldServer is a webhook.Server without a listener of its own.
type heldServer struct {
	cp      *WebhookControlPlane
	mux     *http.ServeMux
	started atomic.Bool
}

func (s *heldServer) NeedLeaderElection() bool                { return false }
func (s *heldServer) Register(path string, hook http.Handler) { s.mux.Handle(path, hook) }
func (s *heldServer) WebhookMux() *http.ServeMux              { return s.mux }

func (s *heldServer) StartedChecker() healthz.Checker {
	return func(*http.Request) error {
		if !s.started.Load() {
			return errors.New("the webhook server has not started")
		}
		return nil
	}
}

func (s *heldServer) Start(ctx context.Context) error {
	stop, err := s.cp.Serve(s.mux)
	if err != nil {
		return err
	}
	defer stop()
	s.started.Store(true)
	<-ctx.Done()
	return nil
}

// webhookShared is the webhook control plane of this test binary, started on first use.
var webhookShared struct {
	mu  sync.Mutex
	cp  *WebhookControlPlane
	err error
}

// ControlPlaneWithWebhooks returns the shared control plane with Lockstep's CRDs and its
// webhooks (config/webhook/manifests.yaml) installed, pointing at this test binary. It is a
// second API server besides ControlPlane's, so that tests there can create objects the
// webhooks would refuse. Give each test its own namespace; only one manager at a time may
// serve the webhooks.
func ControlPlaneWithWebhooks(t testing.TB) *WebhookControlPlane {
	t.Helper()
	webhookShared.mu.Lock()
	defer webhookShared.mu.Unlock()
	if webhookShared.cp == nil && webhookShared.err == nil {
		webhookShared.cp, webhookShared.err = startWebhookControlPlane()
	}
	if webhookShared.err != nil {
		t.Fatal(webhookShared.err)
	}
	cp := *webhookShared.cp
	cp.Config = rest.CopyConfig(cp.Config)
	return &cp
}

func startWebhookControlPlane() (*WebhookControlPlane, error) {
	shared.mu.Lock()
	err := needMain()
	shared.mu.Unlock()
	if err != nil {
		return nil, err
	}
	assets, err := envtestAssets()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the webhooks: %w", err)
	}
	root := moduleRoot()
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		WebhookInstallOptions: envtest.WebhookInstallOptions{
			Paths:            []string{filepath.Join(root, "config", "webhook", "manifests.yaml")},
			LocalServingHost: "127.0.0.1",
			LocalServingPort: ln.Addr().(*net.TCPAddr).Port,
		},
		ControlPlaneStartTimeout: startTimeout,
		ControlPlaneStopTimeout:  30 * time.Second,
	}
	cfg, err := env.Start()
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("start control plane with webhooks (kube-apiserver, etcd from %s): %w", assets, err)
	}
	o := &env.WebhookInstallOptions
	cert, err := tls.LoadX509KeyPair(filepath.Join(o.LocalServingCertDir, "tls.crt"), filepath.Join(o.LocalServingCertDir, "tls.key"))
	if err != nil {
		_ = ln.Close()
		_ = env.Stop()
		return nil, fmt.Errorf("load the webhook serving certificate envtest wrote: %w", err)
	}
	cp := &WebhookControlPlane{Config: cfg, CertDir: o.LocalServingCertDir, CAData: o.LocalServingCAData, serving: &webhookServing{}}
	srv := &http.Server{Handler: cp.serving, ErrorLog: log.New(io.Discard, "", 0), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		_ = srv.Serve(tls.NewListener(ln, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}))
	}()
	shared.mu.Lock()
	shared.stops = append(shared.stops, func() { _ = srv.Close(); _ = env.Stop() })
	shared.mu.Unlock()
	return cp, nil
}
