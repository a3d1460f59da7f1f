package translate

import "os"

func readTestdata(path string) ([]byte, error) { return os.ReadFile(path) }
