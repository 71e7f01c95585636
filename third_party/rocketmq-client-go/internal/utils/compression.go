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

package utils

import (
	"bytes"
	"compress/zlib"
	stderrors "errors"
	"fmt"
	"io"
	"io/ioutil"
	"sync"

	"github.com/apache/rocketmq-client-go/v2/errors"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

var zlibWriterPools []sync.Pool

var bufPool = sync.Pool{
	New: func() interface{} {
		return &bytes.Buffer{}
	},
}

func init() {
	zlibWriterPools = make([]sync.Pool, zlib.BestCompression)
	for i := 0; i < zlib.BestCompression; i++ {
		compressLevel := i
		zlibWriterPools[i] = sync.Pool{
			New: func() interface{} {
				z, _ := zlib.NewWriterLevel(nil, compressLevel+1)
				return z
			},
		}
	}
}

func Compress(raw []byte, compressLevel int) ([]byte, error) {
	if compressLevel < zlib.BestSpeed || compressLevel > zlib.BestCompression {
		return nil, errors.ErrCompressLevel
	}

	buf := bufPool.Get().(*bytes.Buffer)
	defer bufPool.Put(buf)
	writerPool := &zlibWriterPools[compressLevel-1]
	writer := writerPool.Get().(*zlib.Writer)
	defer writerPool.Put(writer)
	buf.Reset()
	writer.Reset(buf)
	_, e := writer.Write(raw)
	if e != nil {
		return nil, e
	}

	e = writer.Close()
	if e != nil {
		return nil, e
	}
	result := make([]byte, buf.Len())
	buf.Read(result)
	return result, nil
}

func UnCompress(data []byte) []byte {
	retData, err := Decompress(data, CompressionZlib, 0)
	if err != nil {
		return data
	}
	return retData
}

// Compression types: bits 8-10 of a message's system flag, as RocketMQ 5
// defines them (MessageSysFlag.COMPRESSION_TYPE_COMPARATOR and
// CompressionType.findByValue). A compressed message whose type is 0 comes
// from a client older than the types: zlib. (orderflow patch)
const (
	CompressionTypeShift = 8
	CompressionTypeMask  = 0x7 << CompressionTypeShift

	CompressionDefault = 0 // zlib, written by older clients
	CompressionLZ4     = 1 // the LZ4 frame format (lz4-java's LZ4FrameOutputStream)
	CompressionZstd    = 2 // the Zstandard frame format (zstd-jni's ZstdOutputStream)
	CompressionZlib    = 3 // zlib (RFC 1950, java.util.zip.Deflater)
)

// CompressionTypeOf returns the compression type that sysFlag names.
// (orderflow patch)
func CompressionTypeOf(sysFlag int32) int {
	return int(sysFlag&CompressionTypeMask) >> CompressionTypeShift
}

// CompressionName names a compression type: "zlib", "lz4", "zstd", or
// "type N" for a type RocketMQ does not define. (orderflow patch)
func CompressionName(compression int) string {
	switch compression {
	case CompressionDefault, CompressionZlib:
		return "zlib"
	case CompressionLZ4:
		return "lz4"
	case CompressionZstd:
		return "zstd"
	}
	return fmt.Sprintf("type %d", compression)
}

// CompressionByName returns the compression type that CompressionName
// names, and false for a name of no type it can decode. (orderflow patch)
func CompressionByName(name string) (int, bool) {
	switch name {
	case "zlib":
		return CompressionZlib, true
	case "lz4":
		return CompressionLZ4, true
	case "zstd":
		return CompressionZstd, true
	}
	return 0, false
}

// ErrInflateLimit is returned by Decompress when the output would exceed
// the limit. (orderflow patch)
var ErrInflateLimit = stderrors.New("inflates past the limit")

// ErrUnknownCompression is returned by Decompress for a compression type it
// does not know. (orderflow patch)
var ErrUnknownCompression = stderrors.New("unknown compression type")

// errNoData: a compressed body needs at least one frame or stream header.
var errNoData = stderrors.New("no compressed data")

// MaxZstdWindow bounds the window a zstd frame may declare: 128 MiB, the
// default limit of the reference decoder (ZSTD_WINDOWLOG_LIMIT_DEFAULT), so
// that what zstd-jni's own decoder accepts is accepted here (the Java
// client's level 22 declares 128 MiB). The bounded decoder writes into a
// buffer of the inflate limit and one block and keeps no window of its own,
// so a large window costs no memory. (orderflow patch)
const MaxZstdWindow = 128 << 20

var (
	zstdOnce      sync.Once
	zstdBounded   *zstd.Decoder // DecodeAll stops at the capacity of dst
	zstdUnbounded *zstd.Decoder
	zstdErr       error
)

// zstdDecoders returns the shared decoders. DecodeAll is safe for
// concurrent use; no goroutine of theirs runs outside a call.
func zstdDecoders() (bounded, unbounded *zstd.Decoder, err error) {
	zstdOnce.Do(func() {
		opts := []zstd.DOption{zstd.WithDecoderMaxWindow(MaxZstdWindow), zstd.WithDecoderConcurrency(0)}
		if zstdBounded, zstdErr = zstd.NewReader(nil, append(opts, zstd.WithDecodeAllCapLimit(true))...); zstdErr != nil {
			return
		}
		zstdUnbounded, zstdErr = zstd.NewReader(nil, opts...)
	})
	return zstdBounded, zstdUnbounded, zstdErr
}

// Decompress decodes data compressed with the given type (one of the
// Compression constants), producing at most limit bytes when limit > 0.
// It returns ErrInflateLimit when the output would exceed limit, an error
// wrapping ErrUnknownCompression for a type it does not know, and the
// decoder's error for data that is not one complete, valid stream of the
// type (corrupt, truncated, empty). Every decoder is bounded: zlib and LZ4
// stream through a reader that stops one byte past the limit (LZ4 also
// holds one block, at most 4 MiB, the format's largest); zstd decodes into
// a buffer of the limit and one block (128 KiB), whatever window its frame
// declares, and refuses a window past MaxZstdWindow.
//
// orderflow patch: the client used to inflate zlib only, and without a
// bound, so a small compressed message could exhaust the consumer's
// memory, and the LZ4 and zstd bodies of RocketMQ 5 clients reached the
// application still compressed, as if they were plain.
func Decompress(data []byte, compression int, limit int64) ([]byte, error) {
	if limit < 0 {
		limit = 0
	}
	switch compression {
	case CompressionDefault, CompressionZlib:
		if len(data) == 0 {
			return nil, errNoData
		}
		r, err := zlib.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, err
		}
		return readLimited(r, limit)
	case CompressionLZ4:
		if len(data) == 0 {
			return nil, errNoData
		}
		return readLimited(lz4.NewReader(bytes.NewReader(data)), limit)
	case CompressionZstd:
		return decodeZstd(data, limit)
	}
	return nil, fmt.Errorf("%w %d", ErrUnknownCompression, compression)
}

// readLimited reads r to its end, or returns ErrInflateLimit as soon as it
// yields more than limit bytes (limit > 0).
func readLimited(r io.Reader, limit int64) ([]byte, error) {
	if limit > 0 {
		r = io.LimitReader(r, limit+1)
	}
	out, err := ioutil.ReadAll(r)
	if limit > 0 && int64(len(out)) > limit {
		return nil, ErrInflateLimit
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// zstdBlockSlack is the room a bounded zstd decode leaves past limit+1
// bytes: a whole block (at most 128 KiB of output) and the decoder's
// over-allocation, so that a valid block that starts within the limit
// always fits.
const zstdBlockSlack = 128<<10 + 1<<10

// decodeZstd decodes the zstd frames of data, at most limit bytes of them
// when limit > 0. The bounded decoder writes into a buffer of
// limit+1+zstdBlockSlack bytes and stops when it is full; any output past
// limit, whatever error follows it, means the body inflates past the limit.
func decodeZstd(data []byte, limit int64) ([]byte, error) {
	if len(data) == 0 {
		return nil, errNoData
	}
	bounded, unbounded, err := zstdDecoders()
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		out, err := unbounded.DecodeAll(data, nil)
		if err != nil {
			return nil, err
		}
		return out, nil
	}
	out, err := bounded.DecodeAll(data, make([]byte, 0, limit+1+zstdBlockSlack))
	switch {
	case int64(len(out)) > limit, stderrors.Is(err, zstd.ErrDecoderSizeExceeded):
		return nil, ErrInflateLimit
	case err != nil:
		return nil, err
	}
	if cap(out) > 2*len(out) {
		out = append(make([]byte, 0, len(out)), out...)
	}
	return out, nil
}
