// C = A @ B, one thread per output element (source for the agent frontend tests; golden data given).
__global__ void matmul(const float* A, const float* B, float* C, int M, int N, int K) {
    int m = blockIdx.y * blockDim.y + threadIdx.y;
    int n = blockIdx.x * blockDim.x + threadIdx.x;
    if (m < M && n < N) {
        float acc = 0.0f;
        for (int k = 0; k < K; ++k) acc += A[m * K + k] * B[k * N + n];
        C[m * N + n] = acc;
    }
}
