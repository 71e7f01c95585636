package testenv

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/orderflow/orderflow/internal/mq"
)

// TLSRocketMQ is a RocketMQ name server and broker of their own, started
// by the test in RocketMQ's enforcing TLS mode (tls.server.mode=enforcing:
// plain TCP connections are refused) with a certificate the test made.
// The broker connects to its name server over TLS too, verifying it
// against the same CA.
type TLSRocketMQ struct {
	// Namesrv and Broker are their 127.0.0.1 addresses.
	Namesrv, Broker string
	// CAFile is the PEM certificate of the CA that signed the servers'
	// certificate, valid for 127.0.0.1, localhost and ServerName.
	CAFile string
	// TLS is a client configuration that trusts CAFile.
	TLS *tls.Config
	// Dir holds the certificates, the configuration, the store and the
	// logs (namesrv.log, broker.log).
	Dir string
}

// TLSServerName is a name on the servers' certificate that is no address
// of theirs, to check ROCKETMQ_TLS_SERVER_NAME.
const TLSServerName = "rocketmq.orderflow.test"

// StartTLSRocketMQ starts a name server and a broker in enforcing TLS mode
// on free ports of 127.0.0.1, from the RocketMQ jars that `make up` caches
// (ORDERFLOW_CACHE, default ~/.cache/orderflow), and stops them when the
// test ends. It returns once the broker has registered with the name
// server. The JVMs take 256 MiB (name server) and 512 MiB (broker) of heap
// at most; a start takes some 10-30 s on 2 cores. Missing Java or jars fail
// the test, naming what to run.
func StartTLSRocketMQ(t testing.TB) *TLSRocketMQ {
	t.Helper()
	SkipShort(t, "Java 17 and the RocketMQ jars")
	QuietRocketMQ()
	lib := rocketmqLib(t)
	if _, err := exec.LookPath("java"); err != nil {
		t.Fatalf("testenv: no java on PATH (%v): RocketMQ needs a Java 17 JDK; `make deps` installs it", err)
	}
	dir := t.TempDir()
	r := &TLSRocketMQ{Dir: dir}
	serverCert, serverKey := r.writeCertificates(t)

	nsPort := freePort(t, 0)
	brokerPort := freePort(t, 2) // the broker listens on P, P-2 (its VIP channel) and P+1 (HA)
	r.Namesrv = "127.0.0.1:" + strconv.Itoa(nsPort)
	r.Broker = "127.0.0.1:" + strconv.Itoa(brokerPort)
	writeFile(t, filepath.Join(dir, "namesrv.conf"), "listenPort="+strconv.Itoa(nsPort)+"\nbindAddress=127.0.0.1\n")
	store := filepath.Join(dir, "store")
	writeFile(t, filepath.Join(dir, "broker.conf"), strings.Join([]string{
		"brokerClusterName=TLSCluster", "brokerName=broker-tls", "brokerId=0", "brokerRole=ASYNC_MASTER",
		"flushDiskType=ASYNC_FLUSH", "namesrvAddr=" + r.Namesrv, "brokerIP1=127.0.0.1",
		"listenPort=" + strconv.Itoa(brokerPort), "bindAddress=127.0.0.1",
		"storePathRootDir=" + store, "storePathCommitLog=" + filepath.Join(store, "commitlog"),
		"mappedFileSizeCommitLog=16777216", "mappedFileSizeConsumeQueue=600000", "transientStorePoolEnable=false",
		"warmMapedFileEnable=false", "diskMaxUsedSpaceRatio=95", "autoCreateTopicEnable=true",
		"autoCreateSubscriptionGroup=true", "registerNameServerPeriod=10000",
		"sendMessageThreadPoolNums=2", "pullMessageThreadPoolNums=4", ""}, "\n"))

	// RocketMQ's TlsSystemConfig reads these system properties: the
	// servers refuse plain TCP, present the test's certificate and ask no
	// client certificate; the broker's own client (to the name server)
	// uses TLS and verifies the name server against the CA.
	tlsProps := []string{
		"-Dtls.server.mode=enforcing", "-Dtls.test.mode.enable=false",
		"-Dtls.server.need.client.auth=none", "-Dtls.server.authClient=false",
		"-Dtls.server.certPath=" + serverCert, "-Dtls.server.keyPath=" + serverKey,
		"-Dtls.enable=true", "-Dtls.client.authServer=true", "-Dtls.client.trustCertPath=" + r.CAFile,
		"-Dtls.config.file=" + filepath.Join(dir, "no-tls.properties"),
	}
	startJVM(t, lib, dir, "namesrv", "-Xms256m -Xmx256m -XX:MaxDirectMemorySize=128m", tlsProps,
		"org.apache.rocketmq.namesrv.NamesrvStartup", "-c", filepath.Join(dir, "namesrv.conf"))
	startJVM(t, lib, dir, "broker", "-Xms512m -Xmx512m -XX:MaxDirectMemorySize=256m", tlsProps,
		"org.apache.rocketmq.broker.BrokerStartup", "-c", filepath.Join(dir, "broker.conf"))
	for _, a := range []string{r.Namesrv, r.Broker} {
		if err := waitPort(a, 2*time.Minute); err != nil {
			t.Fatalf("testenv: TLS RocketMQ: %v\n%s", err, r.logs())
		}
	}
	return r
}

// CreateTopic creates topic on the broker over TLS and waits until the
// name server routes its queues (the broker has registered).
func (r *TLSRocketMQ) CreateTopic(t testing.TB, topic string, queues int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := mq.CreateTopic(ctx, []string{r.Namesrv}, r.Broker, topic, queues, r.TLS); err != nil {
		t.Fatalf("testenv: TLS RocketMQ: %v\n%s", err, r.logs())
	}
}

// logs is the tail of both servers' logs, for a failure message.
func (r *TLSRocketMQ) logs() string {
	var b strings.Builder
	for _, n := range []string{"namesrv", "broker"} {
		out, _ := os.ReadFile(filepath.Join(r.Dir, n+".log"))
		if len(out) > 3000 {
			out = out[len(out)-3000:]
		}
		fmt.Fprintf(&b, "--- %s.log (end):\n%s\n", n, out)
	}
	return b.String()
}

// writeCertificates makes a CA and, signed by it, the servers' certificate
// and PKCS #8 key (what Netty reads); it sets CAFile and TLS and returns
// the server's files.
func (r *TLSRocketMQ) writeCertificates(t testing.TB) (certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	caTpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "orderflow test RocketMQ CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTpl, caTpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "orderflow test RocketMQ"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(24 * time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost", TLSServerName},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	r.CAFile = filepath.Join(r.Dir, "ca.pem")
	certFile, keyFile = filepath.Join(r.Dir, "server.pem"), filepath.Join(r.Dir, "server.key")
	writeFile(t, r.CAFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})))
	writeFile(t, certFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	writeFile(t, keyFile, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})))
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	r.TLS = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return certFile, keyFile
}

// rocketmqLib is the folder of the RocketMQ jars scripts/stack.sh caches.
func rocketmqLib(t testing.TB) string {
	t.Helper()
	cache := os.Getenv("ORDERFLOW_CACHE")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("testenv: home directory: %v", err)
		}
		cache = filepath.Join(home, ".cache", "orderflow")
	}
	version := "5.3.3"
	if pom, err := os.ReadFile(filepath.Join(moduleRoot(t), "deploy", "rocketmq", "pom.xml")); err == nil {
		if m := regexp.MustCompile(`<rocketmq\.version>([^<]+)</`).FindSubmatch(pom); m != nil {
			version = string(m[1])
		}
	}
	lib := filepath.Join(cache, "rocketmq-"+version, "lib")
	if _, err := os.Stat(filepath.Join(lib, "rocketmq-broker-"+version+".jar")); err != nil {
		t.Fatalf("testenv: the RocketMQ %s jars are missing (%v); `make up` (scripts/stack.sh up) fetches them into %s", version, err, cache)
	}
	return lib
}

// moduleRoot is the folder of orderflow's go.mod, above the test's.
func moduleRoot(t testing.TB) string {
	t.Helper()
	d, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if b, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && strings.Contains(string(b), "module github.com/orderflow/orderflow\n") {
			return d
		}
		up := filepath.Dir(d)
		if up == d {
			t.Fatal("testenv: not inside the orderflow module")
		}
		d = up
	}
}

// startJVM starts a RocketMQ server as scripts/stack/rocketmq.sh does
// (rmq_java), logging to dir/name.log, and stops it when the test ends:
// SIGTERM, then SIGKILL after 20 s.
func startJVM(t testing.TB, lib, dir, name, heap string, props []string, main string, args ...string) {
	t.Helper()
	home := filepath.Join(dir, name+"-home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	jvm := append(strings.Fields(heap), "-XX:+UseG1GC", "-XX:-OmitStackTraceInFastThrow",
		"--add-opens", "java.base/java.lang=ALL-UNNAMED", "--add-opens", "java.base/java.nio=ALL-UNNAMED",
		"--add-opens", "java.base/sun.nio.ch=ALL-UNNAMED", "--add-opens", "java.base/java.util=ALL-UNNAMED",
		"--add-exports", "java.base/jdk.internal.ref=ALL-UNNAMED",
		"-Duser.home="+home, "-Drocketmq.home.dir="+home)
	jvm = append(append(jvm, props...), "-cp", filepath.Join(lib, "*"), main)
	cmd := exec.Command("java", append(jvm, args...)...)
	cmd.Env = append(os.Environ(), "ROCKETMQ_HOME="+home)
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		t.Fatalf("testenv: start the TLS %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
}

// freePort returns a free port p of 127.0.0.1 with p-below .. p+1 free as
// well.
func freePort(t testing.TB, below int) int {
	t.Helper()
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		ok := p-below > 1024 && p+1 < 65536
		for q := p - below; ok && q <= p+1; q++ {
			if q == p {
				continue
			}
			l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(q))
			if err != nil {
				ok = false
				break
			}
			l.Close()
		}
		if ok {
			return p
		}
	}
	t.Fatal("testenv: no free ports for RocketMQ")
	return 0
}

func waitPort(addr string, d time.Duration) error {
	end := time.Now().Add(d)
	for {
		err := dialCheck(addr)
		if err == nil {
			return nil
		}
		if time.Now().After(end) {
			return fmt.Errorf("%s not listening after %s: %w", addr, d, err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func writeFile(t testing.TB, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}
