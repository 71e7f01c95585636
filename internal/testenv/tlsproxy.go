package testenv

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TLSProxy terminates TLS (with ALPN h2, as gRPC clients require) on
// 127.0.0.1 in front of a plaintext gRPC server, so that a test can run a
// program against "a Temporal cluster that needs TLS" and see what it sent:
// the handshakes and the authorization headers of its requests.
type TLSProxy struct {
	ln     net.Listener
	target string
	// CAFile is the PEM certificate clients must trust (self-signed, for
	// 127.0.0.1 and localhost).
	CAFile string

	mu         sync.Mutex
	handshakes int
	auth       map[string]bool
	wg         sync.WaitGroup
}

// StartTLSProxy listens on a free port of 127.0.0.1 until the test ends.
func StartTLSProxy(t testing.TB, target string) *TLSProxy {
	t.Helper()
	cert, caFile := selfSigned(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, NextProtos: []string{"h2"},
		MinVersion: tls.VersionTLS12})
	if err != nil {
		t.Fatalf("testenv: TLS proxy: %v", err)
	}
	p := &TLSProxy{ln: ln, target: target, CAFile: caFile, auth: map[string]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() { ln.Close(); p.wg.Wait() })
	return p
}

// Addr is the proxy's host:port.
func (p *TLSProxy) Addr() string { return p.ln.Addr().String() }

// Handshakes counts the TLS handshakes completed.
func (p *TLSProxy) Handshakes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.handshakes
}

// SawAuthorization reports whether a request carried this authorization
// header value ("Bearer <key>").
func (p *TLSProxy) SawAuthorization(v string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.auth[v]
}

func (p *TLSProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.forward(c.(*tls.Conn))
	}
}

func (p *TLSProxy) forward(c *tls.Conn) {
	defer p.wg.Done()
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := c.Handshake(); err != nil {
		return
	}
	c.SetDeadline(time.Time{})
	p.mu.Lock()
	p.handshakes++
	p.mu.Unlock()
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		return
	}
	defer up.Close()
	// Client to server: copied, and read for request headers.
	pr, pw := io.Pipe()
	go p.readHeaders(pr)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(io.MultiWriter(up, pw), c); pw.Close(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
}

// readHeaders decodes the HTTP/2 frames a client sends and records its
// authorization header values.
func (p *TLSProxy) readHeaders(r io.Reader) {
	defer io.Copy(io.Discard, r)
	preface := make([]byte, len(http2.ClientPreface))
	if _, err := io.ReadFull(r, preface); err != nil || !bytes.Equal(preface, []byte(http2.ClientPreface)) {
		return
	}
	fr := http2.NewFramer(nil, r)
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if strings.EqualFold(f.Name, "authorization") {
			p.mu.Lock()
			p.auth[f.Value] = true
			p.mu.Unlock()
		}
	})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		switch f := f.(type) {
		case *http2.HeadersFrame:
			_, _ = dec.Write(f.HeaderBlockFragment())
		case *http2.ContinuationFrame:
			_, _ = dec.Write(f.HeaderBlockFragment())
		}
	}
}

// selfSigned makes a certificate for 127.0.0.1 and localhost and writes it
// (PEM) to a file clients can trust.
func selfSigned(t testing.TB) (tls.Certificate, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "orderflow test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, file
}
