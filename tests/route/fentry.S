/* __fentry__ for the zkl-route-o2 build (gcc -O2 -pg -mfentry, tests/route/meson.build):
 * each function that survived inlining calls it first thing; it hands route.c's
 * __cyg_profile_func_enter() an address inside that function and the function's return
 * address, keeping every argument register (the vector ones too) as it found them. */
	.text
	.globl	__fentry__
	.type	__fentry__, @function
__fentry__:
	push	%rbp
	mov	%rsp, %rbp
	push	%rdi
	push	%rsi
	push	%rdx
	push	%rcx
	push	%r8
	push	%r9
	push	%rax
	push	%r10
	push	%r11
	sub	$128, %rsp
	movdqu	%xmm0, 0(%rsp)
	movdqu	%xmm1, 16(%rsp)
	movdqu	%xmm2, 32(%rsp)
	movdqu	%xmm3, 48(%rsp)
	movdqu	%xmm4, 64(%rsp)
	movdqu	%xmm5, 80(%rsp)
	movdqu	%xmm6, 96(%rsp)
	movdqu	%xmm7, 112(%rsp)
	mov	8(%rbp), %rdi		/* inside the traced function */
	mov	16(%rbp), %rsi		/* where it returns to */
	and	$-16, %rsp
	call	__cyg_profile_func_enter
	lea	-200(%rbp), %rsp
	movdqu	0(%rsp), %xmm0
	movdqu	16(%rsp), %xmm1
	movdqu	32(%rsp), %xmm2
	movdqu	48(%rsp), %xmm3
	movdqu	64(%rsp), %xmm4
	movdqu	80(%rsp), %xmm5
	movdqu	96(%rsp), %xmm6
	movdqu	112(%rsp), %xmm7
	add	$128, %rsp
	pop	%r11
	pop	%r10
	pop	%rax
	pop	%r9
	pop	%r8
	pop	%rcx
	pop	%rdx
	pop	%rsi
	pop	%rdi
	pop	%rbp
	ret
	.size	__fentry__, .-__fentry__
	.section .note.GNU-stack,"",@progbits
