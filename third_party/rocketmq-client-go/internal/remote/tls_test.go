// orderflow patch: change 6, TLS. Tests of the TLS connections.

package remote

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"
)

// ctx bounds a call to 10 s.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

// selfSigned returns a server certificate for 127.0.0.1 and a pool that
// trusts it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "remote test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"broker.test"},
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, IsCA: true, BasicConstraintsValid: true,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// echoServer answers every request read from a connection with a response
// of the same opaque and code, until the listener closes.
func echoServer(t *testing.T, ln net.Listener) {
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func(c net.Conn) {
				defer c.Close()
				for {
					var n int32
					if err := binary.Read(c, binary.BigEndian, &n); err != nil {
						return
					}
					buf := make([]byte, n)
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					req, err := decode(buf)
					if err != nil {
						return
					}
					resp := NewRemotingCommand(req.Code, nil, []byte("pong"))
					resp.Opaque = req.Opaque
					resp.markResponseType()
					if err := resp.WriteTo(c); err != nil {
						return
					}
				}
			}(c)
		}
	}()
}

func TestInvokeSyncOverTLS(t *testing.T) {
	cert, pool := selfSigned(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, ln)

	for _, name := range []string{"", "broker.test"} {
		c := NewRemotingClient(WithTLS(nil, &tls.Config{RootCAs: pool, ServerName: name}))
		resp, err := c.InvokeSync(ctx(t), ln.Addr().String(), NewRemotingCommand(11, nil, []byte("ping")))
		if err != nil {
			t.Fatalf("server name %q: InvokeSync over TLS: %v", name, err)
		}
		if string(resp.Body) != "pong" {
			t.Fatalf("server name %q: body %q, want pong", name, resp.Body)
		}
		c.ShutDown()
	}
	if DefaultRemotingClientConfig.TLSConfig != nil {
		t.Fatal("WithTLS changed DefaultRemotingClientConfig")
	}
}

func TestTLSRefusesUntrustedServer(t *testing.T) {
	cert, _ := selfSigned(t)
	_, other := selfSigned(t)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, ln)
	c := NewRemotingClient(WithTLS(nil, &tls.Config{RootCAs: other}))
	defer c.ShutDown()
	_, err = c.InvokeSync(ctx(t), ln.Addr().String(), NewRemotingCommand(11, nil, nil))
	if err == nil || !strings.Contains(err.Error(), "tls handshake") || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("InvokeSync to an untrusted server: %v, want a certificate error of the handshake", err)
	}
}

// A plain TCP server never answers the client's hello: the handshake ends
// at the connection timeout.
func TestTLSHandshakeBoundedByConnectionTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	cfg := WithTLS(nil, &tls.Config{})
	cfg.ConnectionTimeout = 300 * time.Millisecond
	c := NewRemotingClient(cfg)
	defer c.ShutDown()
	start := time.Now()
	_, err = c.InvokeSync(ctx(t), ln.Addr().String(), NewRemotingCommand(11, nil, nil))
	if err == nil {
		t.Fatal("InvokeSync to a silent plain server succeeded")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("the handshake took %v, want about the connection timeout", d)
	}
}

func TestPlainStaysPlain(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	echoServer(t, ln)
	c := NewRemotingClient(nil)
	defer c.ShutDown()
	resp, err := c.InvokeSync(ctx(t), ln.Addr().String(), NewRemotingCommand(11, nil, nil))
	if err != nil || string(resp.Body) != "pong" {
		t.Fatalf("plain InvokeSync: %v, %v", resp, err)
	}
}
