/*
 * Licensed to the Apache Software Foundation (ASF) under one or more
 * contributor license agreements.  See the NOTICE file distributed with
 * this work for additional information regarding copyright ownership.
 * The ASF licenses this file to You under the Apache License, Version 2.0
 * (the "License"); you may not use this file except in compliance with
 * the License.  You may obtain a copy of the License at
 *
 *     http://www.apache.org/licenses/LICENSE-2.0
 *
 *  Unless required by applicable law or agreed to in writing, software
 *  distributed under the License is distributed on an "AS IS" BASIS,
 *  WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 *  See the License for the specific language governing permissions and
 *  limitations under the License.
 */
package remote

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"go.uber.org/atomic"
)

// TODO: Adding TCP Connections Pool, https://github.com/apache/rocketmq-client-go/v2/issues/298
type tcpConnWrapper struct {
	net.Conn
	sync.Mutex
	closed atomic.Bool
}

func initConn(ctx context.Context, addr string, config *RemotingClientConfig) (*tcpConnWrapper, error) {
	var d net.Dialer

	d.KeepAlive = config.KeepAliveDuration
	d.Deadline = time.Now().Add(config.ConnectionTimeout)

	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	// orderflow patch: change 6, TLS. With a TLS configuration the
	// connection is a TLS client connection, handshaken here under the
	// dial's deadline, so that a server that does not answer the
	// handshake (or a plain TCP server) fails the connect, not the first
	// request.
	if config.TLSConfig != nil {
		tconn, err := tlsHandshake(ctx, conn, addr, config.TLSConfig, d.Deadline)
		if err != nil {
			conn.Close()
			return nil, err
		}
		conn = tconn
	}
	return &tcpConnWrapper{
		Conn: conn,
	}, nil
}

// tlsHandshake runs the TLS client handshake on conn before deadline and
// returns the TLS connection. An empty ServerName in cfg is set to the
// host of addr (an IP address is verified against the certificate's IP
// addresses). orderflow patch: change 6, TLS.
func tlsHandshake(ctx context.Context, conn net.Conn, addr string, cfg *tls.Config, deadline time.Time) (net.Conn, error) {
	if cfg.ServerName == "" && !cfg.InsecureSkipVerify {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			host = addr
		}
		cfg = cfg.Clone()
		cfg.ServerName = host
	}
	tconn := tls.Client(conn, cfg)
	if err := tconn.SetDeadline(deadline); err != nil {
		return nil, err
	}
	if err := tconn.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("tls handshake with %s: %w", addr, err)
	}
	if err := tconn.SetDeadline(time.Time{}); err != nil {
		return nil, err
	}
	return tconn, nil
}

func (wrapper *tcpConnWrapper) destroy() error {
	wrapper.closed.Swap(true)
	return wrapper.Conn.Close()
}

func (wrapper *tcpConnWrapper) isClosed(err error) bool {
	if !wrapper.closed.Load() {
		return false
	}

	opErr, ok := err.(*net.OpError)
	if !ok {
		return false
	}

	return opErr.Err.Error() == "use of closed network connection"
}
