/*
Licensed to the Apache Software Foundation (ASF) under one or more
contributor license agreements.  See the NOTICE file distributed with
this work for additional information regarding copyright ownership.
The ASF licenses this file to You under the Apache License, Version 2.0
(the "License"); you may not use this file except in compliance with
the License.  You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// orderflow patch: this whole file.

package primitive

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// javaVector reads a body compressed by the RocketMQ Java client's
// compressors (internal/utils/testdata/java).
func javaVector(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "internal", "utils", "testdata", "java", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The system flags the Java client 5.3.3 sets on a compressed message
// (MessageSysFlag: COMPRESSED_FLAG 1; COMPRESSION_LZ4_TYPE 256,
// COMPRESSION_ZSTD_TYPE 512, COMPRESSION_ZLIB_TYPE 768), and the flag of an
// older client's compressed message (the bit alone).
const (
	javaLZ4  int32 = 1 | 256
	javaZstd int32 = 1 | 512
	javaZlib int32 = 1 | 768
	olderZip int32 = 1
)

// pullFrame encodes one message as a pull result carries it (the format
// DecodeMessage reads), with sysFlag, the body as stored and the given
// properties.
func pullFrame(sysFlag int32, body []byte, props map[string]string) []byte {
	var b bytes.Buffer
	w := func(v interface{}) { _ = binary.Write(&b, binary.BigEndian, v) }
	var p strings.Builder
	for k, v := range props {
		p.WriteString(k + string(nameValueSeparator) + v + string(propertySeparator))
	}
	topic := "ORDER_EVENTS"
	w(int32(0))                   // total size
	w(int32(0))                   // magic code
	w(int32(0))                   // body CRC
	w(int32(1))                   // queue ID
	w(int32(0))                   // flag
	w(int64(7))                   // queue offset
	w(int64(1234))                // commit log offset
	w(sysFlag)                    // system flag
	w(int64(1_700_000_000_000))   // born timestamp
	b.Write([]byte{127, 0, 0, 1}) // born host
	w(int32(5000))
	w(int64(1_700_000_000_500))   // store timestamp
	b.Write([]byte{127, 0, 0, 1}) // store host
	w(int32(10911))
	w(int32(0)) // reconsume times
	w(int64(0)) // prepared transaction offset
	w(int32(len(body)))
	b.Write(body)
	b.WriteByte(byte(len(topic)))
	b.WriteString(topic)
	w(int16(p.Len()))
	b.WriteString(p.String())
	return b.Bytes()
}

// decodeOne decodes the frame of one message under the inflate limit.
func decodeOne(t *testing.T, limit int64, sysFlag int32, body []byte, props map[string]string) *MessageExt {
	t.Helper()
	defer SetInflateLimit(InflateLimit())
	SetInflateLimit(limit)
	msgs := DecodeMessage(pullFrame(sysFlag, body, props))
	if len(msgs) != 1 {
		t.Fatalf("%d messages decoded from one", len(msgs))
	}
	return msgs[0]
}

// Bodies the Java client compressed with LZ4, zstd and zlib, and an older
// client's zlib body, arrive as the producer wrote them, unmarked.
func TestDecodeMessageDecodesEveryJavaCompression(t *testing.T) {
	want := javaVector(t, "event.json")
	for _, c := range []struct {
		file string
		flag int32
	}{{"event.json.lz4", javaLZ4}, {"event.json.zstd", javaZstd}, {"event-level22.json.zstd", javaZstd},
		{"event.json.zlib", javaZlib}, {"event.json.zlib", olderZip}} {
		m := decodeOne(t, 64<<10, c.flag, javaVector(t, c.file), map[string]string{"KEYS": "o-1"})
		if !bytes.Equal(m.Body, want) {
			t.Errorf("%s (flag %d): body of %d bytes, want event.json", c.file, c.flag, len(m.Body))
		}
		if v := m.GetProperty(PropertyInflateLimitExceeded) + m.GetProperty(PropertyUndecodable); v != "" {
			t.Errorf("%s: marked %q", c.file, v)
		}
		if m.GetKeys() != "o-1" {
			t.Errorf("%s: keys %q", c.file, m.GetKeys())
		}
	}
}

// A bomb of each compression is left as stored and marked with the limit;
// with no limit (0, upstream's behaviour) it inflates.
func TestDecodeMessageRefusesBombs(t *testing.T) {
	for ext, flag := range map[string]int32{"lz4": javaLZ4, "zstd": javaZstd, "zlib": javaZlib} {
		bomb := javaVector(t, "bomb-1mib."+ext)
		m := decodeOne(t, 64<<10, flag, bomb, nil)
		if !bytes.Equal(m.Body, bomb) || m.GetProperty(PropertyInflateLimitExceeded) != "65536" ||
			m.GetProperty(PropertyUndecodable) != "" {
			t.Errorf("%s bomb: body of %d bytes, marks %q / %q; want the stored %d bytes marked 65536", ext, len(m.Body),
				m.GetProperty(PropertyInflateLimitExceeded), m.GetProperty(PropertyUndecodable), len(bomb))
		}
		m = decodeOne(t, 0, flag, bomb, nil)
		if len(m.Body) != 1<<20 || m.GetProperty(PropertyInflateLimitExceeded) != "" {
			t.Errorf("%s bomb, no limit: body of %d bytes", ext, len(m.Body))
		}
	}
}

// A body that cannot be decoded — truncated, corrupt, plain under a
// compressed flag, of an undefined type — is left as stored and marked with
// the compression and the error.
func TestDecodeMessageMarksUndecodableBodies(t *testing.T) {
	zstdBody := javaVector(t, "event.json.zstd")
	lz4Body := javaVector(t, "event.json.lz4")
	for _, c := range []struct {
		name   string
		flag   int32
		body   []byte
		prefix string
	}{
		{"truncated zstd", javaZstd, zstdBody[:len(zstdBody)-5], "zstd: "},
		{"truncated lz4", javaLZ4, lz4Body[:len(lz4Body)/2], "lz4: "},
		{"corrupt zlib", javaZlib, []byte{0x78, 0x9c, 0xff, 0xff, 0xff}, "zlib: "},
		{"plain body flagged zstd", javaZstd, javaVector(t, "event.json"), "zstd: "},
		{"lz4 body flagged zstd", javaZstd, lz4Body, "zstd: "},
		{"type 5", 1 | 5<<8, javaVector(t, "event.json.zlib"), "type 5: unknown compression type"},
		{"empty zstd", javaZstd, []byte{}, "zstd: "},
	} {
		m := decodeOne(t, 64<<10, c.flag, c.body, nil)
		v := m.GetProperty(PropertyUndecodable)
		if !bytes.Equal(m.Body, c.body) || !strings.HasPrefix(v, c.prefix) || len(v) <= len(c.prefix) ||
			m.GetProperty(PropertyInflateLimitExceeded) != "" {
			t.Errorf("%s: body of %d bytes, mark %q; want the stored %d bytes, a mark starting %q", c.name,
				len(m.Body), v, len(c.body), c.prefix)
		}
	}
}

// Marks the producer set itself are dropped from a compressed message; a
// plain message, and type bits without the compressed bit, are left alone.
func TestDecodeMessageMarksOnlyWhatItDecodes(t *testing.T) {
	forged := map[string]string{PropertyUndecodable: "zstd: forged", PropertyInflateLimitExceeded: "1"}
	m := decodeOne(t, 64<<10, javaZstd, javaVector(t, "event.json.zstd"), forged)
	if m.GetProperty(PropertyUndecodable) != "" || m.GetProperty(PropertyInflateLimitExceeded) != "" {
		t.Errorf("forged marks kept on a decoded body: %v", m.GetProperties())
	}
	zstdBody := javaVector(t, "event.json.zstd")
	m = decodeOne(t, 64<<10, 512, zstdBody, nil)
	if !bytes.Equal(m.Body, zstdBody) || m.GetProperty(PropertyUndecodable) != "" {
		t.Errorf("a body with type bits but no compressed bit was decoded or marked")
	}
	if CompressionOf(512) != "" || CompressionOf(javaZstd) != "zstd" || CompressionOf(javaLZ4) != "lz4" ||
		CompressionOf(javaZlib) != "zlib" || CompressionOf(olderZip) != "zlib" || CompressionOf(1|7<<8) != "type 7" {
		t.Errorf("CompressionOf names the flags wrongly")
	}
}

// Decompress decodes by name under a bound, as the client does.
func TestDecompressByName(t *testing.T) {
	want := javaVector(t, "event.json")
	for _, name := range []string{"lz4", "zstd", "zlib"} {
		got, err := Decompress(name, javaVector(t, "event.json."+name), 64<<10)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %d bytes, %v", name, len(got), err)
		}
		if _, err := Decompress(name, javaVector(t, "bomb-1mib."+name), 64<<10); !errors.Is(err, ErrInflateLimitExceeded) {
			t.Errorf("%s bomb: %v", name, err)
		}
	}
	if _, err := Decompress("type 5", want, 64<<10); err == nil || errors.Is(err, ErrInflateLimitExceeded) {
		t.Errorf("type 5: %v", err)
	}
}
