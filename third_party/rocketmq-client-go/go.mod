module github.com/apache/rocketmq-client-go/v2

go 1.13

require (
	github.com/BurntSushi/toml v1.1.0 // indirect
	github.com/emirpasic/gods v1.12.0
	github.com/go-redis/redis/v8 v8.11.5
	github.com/golang/mock v1.3.1
	github.com/google/uuid v1.3.0
	github.com/json-iterator/go v1.1.12
	github.com/patrickmn/go-cache v2.1.0+incompatible
	github.com/pkg/errors v0.8.1
	github.com/sirupsen/logrus v1.4.0
	github.com/smartystreets/goconvey v1.6.4
	github.com/stretchr/testify v1.5.1
	github.com/tidwall/gjson v1.13.0
	go.uber.org/atomic v1.5.1
	golang.org/x/sys v0.0.0-20220722155257-8c9f86f7a55f // indirect
	gopkg.in/check.v1 v1.0.0-20201130134442-10cb98267c6c // indirect
	gopkg.in/natefinch/lumberjack.v2 v2.0.0
	stathat.com/c/consistent v1.0.0
)
