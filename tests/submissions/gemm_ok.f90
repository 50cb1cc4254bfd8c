subroutine gemm_fp64(A, B, C, NI, NJ, NK, alpha, beta, workspace, workspace_size) bind(C, name="gemm_fp64")
  use iso_c_binding
  implicit none
  integer(c_int64_t), value, intent(in) :: NI, NJ, NK
  real(c_double), value, intent(in) :: alpha, beta
  real(c_double), intent(in) :: A(NK, NI)
  real(c_double), intent(in) :: B(NJ, NK)
  real(c_double), intent(inout) :: C(NJ, NI)
  integer(c_int8_t), intent(inout) :: workspace(*)
  integer(c_int64_t), value, intent(in) :: workspace_size
  integer(c_int64_t) :: i, j, k
  do i = 1, NI
    C(:, i) = beta * C(:, i)
    do k = 1, NK
      do j = 1, NJ
        C(j, i) = C(j, i) + alpha * A(k, i) * B(j, k)
      end do
    end do
  end do
end subroutine gemm_fp64
