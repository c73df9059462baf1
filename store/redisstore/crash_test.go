package redisstore

const childEnv = "SLUICE_REDISSTORE_CRASH_CHILD"

func crashChild() int { return 0 }
