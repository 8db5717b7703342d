package server_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/loomlm/loom/server"
)

// Serve a pipeline file with the OpenAI API and ask it for a completion.
func Example() {
	s := server.New(server.Options{MaxRunning: 4})
	defer s.Close()
	if err := s.Load("../pipelines/greedy.toml"); err != nil {
		fmt.Println(err)
		return
	}
	hs := httptest.NewServer(s) // or http.ListenAndServe("127.0.0.1:8080", s)
	defer hs.Close()

	resp, err := http.Post(hs.URL+"/v1/completions", "application/json",
		strings.NewReader(`{"model": "greedy", "prompt": "x", "temperature": 7}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, strings.TrimSpace(string(body)))
	// Output:
	// 400 {"error":{"message":"temperature: 7 is outside [0, 2]","type":"invalid_request_error","param":"temperature","code":null}}
}
